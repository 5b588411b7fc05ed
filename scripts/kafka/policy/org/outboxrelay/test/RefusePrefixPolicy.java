package org.outboxrelay.test;

import java.util.Map;
import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.server.policy.CreateTopicPolicy;

/**
 * A broker's create-topic policy for outbox-relay's tests, as an operator would deploy one:
 * topics whose name starts with the broker setting {@code outbox.test.refused.topic.prefix}
 * are refused with POLICY_VIOLATION.
 */
public class RefusePrefixPolicy implements CreateTopicPolicy {
    private String prefix = "\u0000";

    @Override
    public void configure(Map<String, ?> configs) {
        Object value = configs.get("outbox.test.refused.topic.prefix");
        if (value != null) {
            prefix = value.toString();
        }
    }

    @Override
    public void validate(RequestMetadata request) throws PolicyViolationException {
        if (request.topic().startsWith(prefix)) {
            throw new PolicyViolationException(
                "Topic " + request.topic() + " is refused by the cluster's naming policy");
        }
    }

    @Override
    public void close() {}
}
