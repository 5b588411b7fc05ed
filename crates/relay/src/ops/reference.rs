//! The option reference, `docs/reference/options.md`, made from the code so that it cannot
//! drift: every command's options from clap (flag, environment variable, `--config` key,
//! default, help), and every option of a Debezium connector configuration outbox-relay knows,
//! from the catalog (`debezium/option_catalog.rs`): where it applies, its default, and what the relay
//! does with it. A test fails when the committed page differs from what the code makes;
//! `OUTBOX_RELAY_WRITE_REFERENCE=1 cargo test -p outbox-relay-core --lib reference` writes it.

use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The page.
pub fn options_markdown() -> String {
    let mut out = String::from(
        "# Option reference\n\n\
         Generated from the code (clap's definitions and the Debezium option catalog); a test fails when \
         this page and the code differ. Run `OUTBOX_RELAY_WRITE_REFERENCE=1 cargo test -p outbox-relay-core \
         --lib reference` after changing an option, and commit the page.\n\n\
         Every option of `run` can also come from the environment (the variable named) or from the \
         `--config` TOML file, whose keys are the long option names without the dashes \
         (`postgres-url = \"...\"`). The command line wins over the environment, which wins over the \
         file.\n\n",
    );
    let cli = crate::cli::command_line();
    let run_options: BTreeSet<String> = cli
        .find_subcommand("run")
        .map(option_names)
        .unwrap_or_default();
    out.push_str("## Global\n\n");
    table(&mut out, cli.get_arguments(), &BTreeSet::new(), false);
    for command in cli.get_subcommands() {
        commands(&mut out, command, command.get_name(), &run_options);
    }
    debezium(&mut out);
    out
}

/// The long names of `command`'s options.
fn option_names(command: &clap::Command) -> BTreeSet<String> {
    command
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_owned))
        .collect()
}

/// `command` (as `path` names it) and its subcommands.
fn commands(out: &mut String, command: &clap::Command, path: &str, run: &BTreeSet<String>) {
    let _ = writeln!(out, "## `{path}`\n");
    if let Some(about) = command.get_about() {
        let _ = writeln!(out, "{}\n", one_line(&about.to_string()));
    }
    let names = option_names(command);
    let shares_run = path != "run" && !run.is_empty() && run.is_subset(&names);
    if shares_run {
        out.push_str("Takes every option of [`run`](#run), and these:\n\n");
    }
    let skip = if shares_run {
        run.clone()
    } else {
        BTreeSet::new()
    };
    table(out, command.get_arguments(), &skip, path == "run");
    for sub in command.get_subcommands() {
        commands(out, sub, &format!("{path} {}", sub.get_name()), run);
    }
}

/// A table of `arguments`, less those named in `skip`; `toml`: they may come from `--config`.
fn table<'a>(
    out: &mut String,
    arguments: impl Iterator<Item = &'a clap::Arg>,
    skip: &BTreeSet<String>,
    toml: bool,
) {
    let rows: Vec<String> = arguments
        .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
        .filter(|a| a.get_long().is_none_or(|l| !skip.contains(l)))
        .map(|a| {
            let name = match (a.get_long(), a.get_value_names()) {
                (Some(long), Some(values)) if a.get_action().takes_values() => {
                    let values: Vec<String> = values.iter().map(ToString::to_string).collect();
                    format!("`--{long} {}`", values.join(" "))
                }
                (Some(long), _) => format!("`--{long}`"),
                (None, Some(values)) => format!(
                    "`{}`",
                    values
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                (None, None) => format!("`{}`", a.get_id()),
            };
            let env = a
                .get_env()
                .map(|e| format!("`{}`", e.to_string_lossy()))
                .unwrap_or_default();
            let key = match (toml, a.get_long()) {
                (true, Some(long)) if long != "config" => format!("`{long}`"),
                _ => String::new(),
            };
            let help = a
                .get_long_help()
                .or_else(|| a.get_help())
                .map(|h| one_line(&h.to_string()))
                .unwrap_or_default();
            let defaults: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let help = if defaults.is_empty() || help.contains("[default:") {
                help
            } else {
                format!("{help} [default: {}]", defaults.join(", "))
            };
            format!("| {} | {env} | {key} | {} |", cell(&name), cell(&help))
        })
        .collect();
    if rows.is_empty() {
        out.push_str("No options of its own.\n\n");
        return;
    }
    out.push_str("| Option | Environment | `--config` key | What it does |\n|---|---|---|---|\n");
    for row in rows {
        out.push_str(&row);
        out.push('\n');
    }
    out.push('\n');
}

/// The Debezium connector options outbox-relay knows.
fn debezium(out: &mut String) {
    out.push_str(
        "## Debezium connector options\n\n\
         What outbox-relay does with each option of a Debezium PostgreSQL connector and Outbox \
         EventRouter configuration (`run --debezium-config`, `outbox-relay connect`). \
         `transforms.<alias>.` precedes the EventRouter's options. An option not listed here is \
         refused by name at start, as `check` and Connect's `config/validate` say.\n\n\
         | Option | Also read as | Where | Default | What outbox-relay does | What it is |\n\
         |---|---|---|---|---|---|\n",
    );
    for spec in crate::debezium::option_catalog::CATALOG {
        let aliases: Vec<String> = spec.aliases.iter().map(|a| format!("`{a}`")).collect();
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} |",
            spec.name,
            aliases.join(", "),
            spec.applies.group(),
            spec.default
                .map(|d| format!("`{}`", cell(d)))
                .unwrap_or_default(),
            cell(&spec.treatment_text()),
            cell(spec.doc),
        );
    }
}

/// Help text on one line: paragraphs and wrapped lines joined.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text for a table cell: `|` escaped, on one line.
fn cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    /// The committed page is the one the code makes.
    #[test]
    fn the_committed_option_reference_is_the_one_the_code_makes() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/reference/options.md"
        );
        let made = super::options_markdown();
        if std::env::var_os("OUTBOX_RELAY_WRITE_REFERENCE").is_some() {
            std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
            std::fs::write(path, &made).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == made,
            "docs/reference/options.md is not what the code makes: run \
             `OUTBOX_RELAY_WRITE_REFERENCE=1 cargo test -p outbox-relay-core --lib reference` and commit it"
        );
    }

    /// Every option of `run` is on the page, with its environment variable.
    #[test]
    fn every_run_option_is_in_the_reference() {
        let page = super::options_markdown();
        let cli = crate::cli::command_line();
        let run = cli.find_subcommand("run").unwrap();
        for arg in run.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                assert!(page.contains(&format!("`--{long}")), "--{long}");
            }
            if let Some(env) = arg.get_env() {
                assert!(page.contains(&*env.to_string_lossy()), "{env:?}");
            }
        }
        assert!(page.contains("`slot.name`"), "the Debezium catalog");
    }
}
