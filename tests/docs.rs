//! The documents a user reads resolve: every relative link of README.md, docs/ and
//! benches/README.md names a file or folder of the repository, and every `#anchor` a heading
//! of the page it points into (GitHub's anchors). The option reference itself is checked
//! against the code by `outbox-relay-core`'s `reference` test.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The Markdown pages: README.md, benches/README.md, CHANGELOG.md and every page under docs/.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(ROOT);
    let mut pages = vec![
        root.join("README.md"),
        root.join("benches/README.md"),
        root.join("CHANGELOG.md"),
    ];
    let mut folders = vec![root.join("docs")];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.retain(|p| p.is_file());
    pages.sort();
    pages
}

/// The text outside fenced code blocks.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// `text` without its inline code spans (a link inside one is no link).
fn without_code(text: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in text.chars() {
        if c == '`' {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of the page's inline links `[text](target)` (`![alt](target)` too).
fn links(text: &str) -> Vec<String> {
    let text = without_code(&prose(text));
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else {
            break;
        };
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        found.push(target.trim_matches(|c| c == '<' || c == '>').to_owned());
        rest = &rest[end..];
    }
    found
}

/// The anchors GitHub gives the page's headings: lowercase, punctuation but `-` and `_`
/// dropped, spaces as `-`, and `-1`, `-2` … for repeats.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashSet<String> = HashSet::new();
    for line in prose(text).lines() {
        let Some(heading) = line
            .strip_prefix('#')
            .map(|h| h.trim_start_matches('#'))
            .filter(|h| h.starts_with(' '))
        else {
            continue;
        };
        // A link in a heading counts by its text.
        let mut title = String::new();
        let mut rest = heading.trim();
        while let Some(open) = rest.find('[') {
            title.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            match (after.find("]("), after.find(')')) {
                (Some(close), Some(end)) if close < end => {
                    title.push_str(&after[..close]);
                    rest = &after[end + 1..];
                }
                _ => {
                    title.push('[');
                    rest = after;
                }
            }
        }
        title.push_str(rest);
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = slug.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{slug}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let pages = pages();
    assert!(pages.len() > 3, "the pages: {pages:?}");
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for target in links(&text) {
            if target.is_empty()
                || target.contains("://")
                || target.starts_with("mailto:")
                || target.starts_with("tel:")
            {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            let shown = format!(
                "{}: {target}",
                page.strip_prefix(ROOT).unwrap_or(page).display()
            );
            if !file.exists() {
                broken.push(format!("{shown} (no such file)"));
                continue;
            }
            if let Some(anchor) = anchor {
                if file.extension().is_some_and(|e| e == "md") {
                    let target_text = std::fs::read_to_string(&file).unwrap();
                    if !anchors(&target_text).contains(&anchor.to_lowercase()) {
                        broken.push(format!("{shown} (no such heading)"));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The anchor rule, on headings whose anchors GitHub is known to give.
#[test]
fn anchors_are_githubs() {
    let page = "# Option reference\n## `run`\n### Byte-identical, measured\n## Exactly-once: no duplicates, without transactions\n## `run`\n";
    let found = anchors(page);
    for anchor in [
        "option-reference",
        "run",
        "byte-identical-measured",
        "exactly-once-no-duplicates-without-transactions",
        "run-1",
    ] {
        assert!(found.contains(anchor), "{anchor}: {found:?}");
    }
}

/// The repository's own text files: everything but build output, the vendored crate and git.
fn repository_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![PathBuf::from(ROOT)];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !["target", "vendor", ".git", "node_modules", "__pycache__"]
                    .contains(&name.as_str())
                {
                    folders.push(path);
                }
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Nothing in the repository speaks of how the project is developed: its work sessions and
/// issue numbers belong to no user's reading (history is in CHANGELOG.md, by date).
#[test]
fn the_repository_speaks_of_the_product() {
    let pattern = |text: &str| {
        let lower = text.to_lowercase();
        ["session ", "issue "].iter().any(|word| {
            lower.match_indices(word).any(|(at, w)| {
                lower[at + w.len()..]
                    .trim_start_matches('#')
                    .starts_with(|c: char| c.is_ascii_digit())
            })
        })
    };
    let found: Vec<String> = repository_files()
        .iter()
        .flat_map(|file| {
            // Text files only.
            let text = std::fs::read(file)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .unwrap_or_default();
            text.lines()
                .filter(|line| pattern(line))
                .map(|line| {
                    format!(
                        "{}: {line}",
                        file.strip_prefix(ROOT).unwrap_or(file).display()
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}
