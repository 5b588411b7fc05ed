//! Authentication of the REST API as Kafka Connect users configure it: the worker's
//! `rest.extension.classes` names `BasicAuthSecurityRestExtension`, whose JAAS file comes
//! from `KAFKA_OPTS` (`-Djava.security.auth.login.config=FILE`), whose `KafkaConnect`
//! section names `PropertyFileLoginModule` with `file="…"`: a properties file of
//! `user=password` lines. Requests without valid credentials get 401 and Connect's text.
//!
//! Any other extension class, login module or a missing piece stops the worker at start,
//! naming it: a worker its operator believes protected never serves unprotected.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const BASIC_AUTH_EXTENSION: &str =
    "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension";
const PROPERTY_FILE_LOGIN_MODULE: &str =
    "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule";
const LOGIN_CONFIG: &str = "-Djava.security.auth.login.config=";
/// The JAAS section Connect's filter logs in with.
const SECTION: &str = "KafkaConnect";
/// `JaasBasicAuthFilter`'s answer to a request it does not authenticate.
pub const UNAUTHORIZED: &str = "User cannot access the resource.";

/// The users and passwords requests are checked against.
pub struct BasicAuth {
    users: BTreeMap<String, String>,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BasicAuth({} users)", self.users.len())
    }
}

/// The authentication the worker configuration asks for: `None` without
/// `rest.extension.classes` (Connect's default: the API trusts its network).
pub fn from_worker(
    worker: &BTreeMap<String, String>,
    kafka_opts: Option<&str>,
) -> Result<Option<BasicAuth>, String> {
    let Some(classes) = worker.get("rest.extension.classes") else {
        return Ok(None);
    };
    let classes: Vec<&str> = classes
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    if let Some(other) = classes.iter().find(|c| **c != BASIC_AUTH_EXTENSION) {
        return Err(format!(
            "rest.extension.classes: {other} is not a REST extension outbox-relay has; it has \
             {BASIC_AUTH_EXTENSION}"
        ));
    }
    if classes.is_empty() {
        return Ok(None);
    }
    let jaas = login_config(kafka_opts.unwrap_or_default()).ok_or_else(|| {
        format!(
            "rest.extension.classes: BasicAuthSecurityRestExtension reads its users from the JAAS file that \
             KAFKA_OPTS names ({LOGIN_CONFIG}FILE), and KAFKA_OPTS names none"
        )
    })?;
    let text = std::fs::read_to_string(&jaas)
        .map_err(|e| format!("KAFKA_OPTS {LOGIN_CONFIG}{}: {e}", jaas.display()))?;
    let credentials =
        credentials_file(&text).map_err(|e| format!("JAAS file {}: {e}", jaas.display()))?;
    let text = std::fs::read_to_string(&credentials).map_err(|e| {
        format!(
            "JAAS file {}: PropertyFileLoginModule file {}: {e}",
            jaas.display(),
            credentials.display()
        )
    })?;
    let users = crate::debezium::parse_properties(&text);
    if users.is_empty() {
        // Kafka's module lets everyone in when the file has no user: never here.
        return Err(format!(
            "PropertyFileLoginModule file {}: no user=password line; an empty file would let anyone in",
            credentials.display()
        ));
    }
    Ok(Some(BasicAuth { users }))
}

/// The file `-Djava.security.auth.login.config=FILE` names in `KAFKA_OPTS` (`==FILE`, which
/// makes it the only JAAS file, too), quotes taken off.
fn login_config(kafka_opts: &str) -> Option<PathBuf> {
    let start = kafka_opts.rfind(LOGIN_CONFIG)? + LOGIN_CONFIG.len();
    let rest = kafka_opts[start..].trim_start_matches('=');
    let value = match rest.chars().next()? {
        quote @ ('"' | '\'') => rest[1..].split(quote).next()?,
        _ => rest.split_whitespace().next()?,
    };
    (!value.is_empty()).then(|| PathBuf::from(value))
}

/// The `file` option of the `KafkaConnect` section's `PropertyFileLoginModule`.
fn credentials_file(jaas: &str) -> Result<PathBuf, String> {
    let sections = parse_jaas(jaas)?;
    let modules = sections
        .get(SECTION)
        .ok_or_else(|| format!("no {SECTION} section (KafkaConnect {{ {PROPERTY_FILE_LOGIN_MODULE} required file=\"…\"; }};)"))?;
    let mut file = None;
    for module in modules {
        if module.class != PROPERTY_FILE_LOGIN_MODULE {
            return Err(format!(
                "{SECTION}: login module {} is not one outbox-relay has; it has {PROPERTY_FILE_LOGIN_MODULE}",
                module.class
            ));
        }
        let path = module
            .options
            .get("file")
            .filter(|f| !f.trim().is_empty())
            .ok_or_else(|| {
                format!(
                    "{SECTION}: PropertyFileLoginModule needs file=\"…\" (the user=password file)"
                )
            })?;
        file = Some(Path::new(path.trim()).to_path_buf());
    }
    file.ok_or_else(|| format!("{SECTION}: no login module"))
}

struct LoginModule {
    class: String,
    options: BTreeMap<String, String>,
}

/// JAAS's configuration file syntax: `Name { Class Flag key=value …; … };`, with `//` and
/// `/* */` comments and quoted values.
fn parse_jaas(text: &str) -> Result<BTreeMap<String, Vec<LoginModule>>, String> {
    let tokens = tokenize(text)?;
    let mut out = BTreeMap::new();
    let mut i = 0;
    let next = |i: &mut usize| -> Option<&Token> {
        let t = tokens.get(*i);
        *i += 1;
        t
    };
    while let Some(token) = next(&mut i) {
        let Token::Word(name) = token else {
            return Err(format!("expected a section name, found {token:?}"));
        };
        if next(&mut i) != Some(&Token::Punct('{')) {
            return Err(format!("{name}: expected {{"));
        }
        let mut modules = Vec::new();
        loop {
            match next(&mut i) {
                Some(Token::Punct('}')) => break,
                Some(Token::Word(class)) => {
                    let flag = match next(&mut i) {
                        Some(Token::Word(f)) => f.to_ascii_lowercase(),
                        _ => return Err(format!("{name}: {class}: expected a flag (required, …)")),
                    };
                    if !["required", "requisite", "sufficient", "optional"].contains(&flag.as_str())
                    {
                        return Err(format!("{name}: {class}: {flag} is not a JAAS flag"));
                    }
                    let mut options = BTreeMap::new();
                    loop {
                        match next(&mut i) {
                            Some(Token::Punct(';')) => break,
                            Some(Token::Word(key)) => {
                                if next(&mut i) != Some(&Token::Punct('=')) {
                                    return Err(format!("{name}: {class}: {key}: expected ="));
                                }
                                let value = match next(&mut i) {
                                    Some(Token::Word(v)) | Some(Token::Quoted(v)) => v.clone(),
                                    _ => {
                                        return Err(format!(
                                            "{name}: {class}: {key}: expected a value"
                                        ))
                                    }
                                };
                                options.insert(key.clone(), value);
                            }
                            other => return Err(format!("{name}: {class}: unexpected {other:?}")),
                        }
                    }
                    modules.push(LoginModule {
                        class: class.clone(),
                        options,
                    });
                }
                other => return Err(format!("{name}: unexpected {other:?}")),
            }
        }
        if next(&mut i) != Some(&Token::Punct(';')) {
            return Err(format!("{name}: expected ; after }}"));
        }
        out.insert(name.clone(), modules);
    }
    Ok(out)
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Punct(char),
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                loop {
                    match chars.next() {
                        Some('/') if last == '*' => break,
                        Some(c) => last = c,
                        None => return Err("a /* comment is not closed".into()),
                    }
                }
            }
            '{' | '}' | ';' | '=' => out.push(Token::Punct(c)),
            '"' => {
                let mut value = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => value.extend(chars.next()),
                        Some(c) => value.push(c),
                        None => return Err("a quoted value is not closed".into()),
                    }
                }
                out.push(Token::Quoted(value));
            }
            c => {
                let mut word = String::from(c);
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || "{};=\"".contains(c) {
                        break;
                    }
                    word.push(c);
                    chars.next();
                }
                out.push(Token::Word(word));
            }
        }
    }
    Ok(out)
}

impl BasicAuth {
    /// Whether an `Authorization` header carries a known user and its password.
    pub fn allows(&self, authorization: Option<&[u8]>) -> bool {
        use base64::Engine;
        let Some(header) = authorization.and_then(|h| std::str::from_utf8(h).ok()) else {
            return false;
        };
        let Some((scheme, encoded)) = header.trim().split_once(' ') else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case("basic") {
            return false;
        }
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let Ok(decoded) = String::from_utf8(decoded) else {
            return false;
        };
        let Some((user, password)) = decoded.split_once(':') else {
            return false;
        };
        self.users
            .get(user)
            .is_some_and(|expected| same(expected.as_bytes(), password.as_bytes()))
    }
}

/// Equal bytes, in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn worker(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn basic(user_password: &str) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_password)
        )
        .into_bytes()
    }

    #[test]
    fn the_jaas_file_from_kafka_opts_names_the_users() {
        let dir = tempfile::tempdir().unwrap();
        let users = dir.path().join("connect.password");
        std::fs::write(&users, "# users\nadmin=s3cret\nreader: r:pw\n").unwrap();
        let jaas = dir.path().join("connect_jaas.conf");
        std::fs::write(
            &jaas,
            format!(
                "// Connect's REST API\nKafkaClient {{ org.example.Other required; }};\n\
                 KafkaConnect {{\n  {PROPERTY_FILE_LOGIN_MODULE} required\n  /* the users */ file=\"{}\";\n}};\n",
                users.display()
            ),
        )
        .unwrap();
        let opts = format!("-Xmx256m {LOGIN_CONFIG}{} -Dfoo=bar", jaas.display());
        let auth = from_worker(
            &worker(&[("rest.extension.classes", BASIC_AUTH_EXTENSION)]),
            Some(&opts),
        )
        .unwrap()
        .unwrap();
        assert!(auth.allows(Some(&basic("admin:s3cret"))));
        assert!(
            auth.allows(Some(&basic("reader:r:pw"))),
            "the password may hold a colon"
        );
        assert!(!auth.allows(Some(&basic("admin:wrong"))));
        assert!(!auth.allows(Some(&basic("nobody:s3cret"))));
        assert!(!auth.allows(Some(b"Bearer abc")));
        assert!(!auth.allows(Some(b"Basic !!!")));
        assert!(!auth.allows(None));
        assert_eq!(format!("{auth:?}"), "BasicAuth(2 users)");

        // Quoted, and with `==`.
        assert_eq!(
            login_config(&format!("{LOGIN_CONFIG}=\"/a b/jaas.conf\" -X")),
            Some(PathBuf::from("/a b/jaas.conf"))
        );
        assert_eq!(login_config("-Xmx1g"), None);
    }

    #[test]
    fn what_cannot_protect_the_api_stops_the_worker() {
        assert!(from_worker(&worker(&[]), None).unwrap().is_none());
        let err = from_worker(
            &worker(&[("rest.extension.classes", "com.example.MyExtension")]),
            None,
        )
        .unwrap_err();
        assert!(
            err.contains("com.example.MyExtension") && err.contains(BASIC_AUTH_EXTENSION),
            "{err}"
        );
        let basic_auth = worker(&[("rest.extension.classes", BASIC_AUTH_EXTENSION)]);
        let err = from_worker(&basic_auth, Some("-Xmx1g")).unwrap_err();
        assert!(err.contains("KAFKA_OPTS"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        let jaas = dir.path().join("jaas.conf");
        let opts = format!("{LOGIN_CONFIG}{}", jaas.display());
        let with = |text: String| {
            std::fs::write(&jaas, text).unwrap();
            from_worker(&basic_auth, Some(&opts)).unwrap_err()
        };
        let err = with("KafkaServer { x required; };".into());
        assert!(err.contains("no KafkaConnect section"), "{err}");
        let err = with("KafkaConnect { com.example.LdapLoginModule required; };".into());
        assert!(err.contains("com.example.LdapLoginModule"), "{err}");
        let err = with(format!(
            "KafkaConnect {{ {PROPERTY_FILE_LOGIN_MODULE} required; }};"
        ));
        assert!(err.contains("needs file="), "{err}");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "# nobody\n").unwrap();
        let err = with(format!(
            "KafkaConnect {{ {PROPERTY_FILE_LOGIN_MODULE} required file=\"{}\"; }};",
            empty.display()
        ));
        assert!(err.contains("would let anyone in"), "{err}");
        let err = with("KafkaConnect { broken".into());
        assert!(err.starts_with("JAAS file"), "{err}");
    }
}
