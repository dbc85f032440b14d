//! The `pipeline.toml` reference, `docs/pipeline-toml.md`, generated from the config structs:
//! their JSON Schema (schemars' derive, which reads the `///` doc comments and honours the serde
//! attributes) rendered to Markdown. Every table, key, type and default comes from the code, and
//! a test fails when the committed file differs from what the code generates.

use serde_json::{Map, Value};

use super::{Options, Template};

/// Where the reference is committed, from the workspace's root.
pub const PATH: &str = "docs/pipeline-toml.md";

/// The command that writes the reference again.
pub const BLESS: &str = "R2E_BLESS=1 cargo test -p r2e-core config::reference";

/// The reference, as Markdown.
pub fn markdown() -> String {
    let schema = serde_json::to_value(schemars::schema_for!(Options)).expect("a schema is JSON");
    let empty = Map::new();
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let r = Render { defs };
    let mut out = String::new();
    out.push_str("# `pipeline.toml` reference (format version 1)\n\n");
    out.push_str(&format!(
        "<!-- Generated from the doc comments of `crates/core/src/config/` by `{BLESS}`; do not edit. -->\n\n"
    ));
    // The root's title is the struct's name: only its description is the file's.
    let intro = schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    push_text(&mut out, &plain_links(intro), "");
    let props = properties(&schema);
    let (keys, tables): (Vec<_>, Vec<_>) = props
        .iter()
        .partition(|(_, s)| matches!(r.kind(s), Kind::Key));
    if !keys.is_empty() {
        out.push_str("## Top-level keys\n\n");
        for (name, s) in keys {
            r.key(&mut out, name, s);
        }
        out.push('\n');
    }
    for (name, s) in tables {
        r.table(&mut out, "##", name, s);
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

/// What a property of a table is in TOML.
enum Kind<'a> {
    /// A value: `key = ...`.
    Key,
    /// A table of keys (`[name]`), its schema.
    Table(&'a Value),
    /// An array of tables (`[[name]]`), the schema of one.
    Tables(&'a Value),
    /// A table of tables named freely (`[name.NAME]`), the schema of one.
    Named(&'a Value),
    /// A table of keys named freely (`[name]`, `NAME = ...`), the schema of one value.
    Free(&'a Value),
}

struct Render<'a> {
    defs: &'a Map<String, Value>,
}

impl<'a> Render<'a> {
    /// The schema `s` stands for: its `$ref` followed, and `null` taken out of an optional one.
    fn resolve(&self, s: &'a Value) -> &'a Value {
        if let Some(name) = s
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
        {
            return self.resolve(&self.defs[name]);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(alts) = s.get(key).and_then(Value::as_array) {
                let real: Vec<&Value> = alts.iter().filter(|a| !is_null(a)).collect();
                if real.len() == 1 && real.len() < alts.len() {
                    return self.resolve(real[0]);
                }
            }
        }
        s
    }

    fn kind(&self, s: &'a Value) -> Kind<'a> {
        let t = self.resolve(s);
        if t.get("properties").is_some() {
            return Kind::Table(t);
        }
        if let Some(items) = t.get("items") {
            let one = self.resolve(items);
            if one.get("properties").is_some() {
                return Kind::Tables(one);
            }
        }
        if let Some(one) = t.get("additionalProperties").filter(|v| v.is_object()) {
            let one = self.resolve(one);
            if one.get("properties").is_some() {
                return Kind::Named(one);
            }
            return Kind::Free(one);
        }
        Kind::Key
    }

    /// A section for the table `name` (its header after `level`), then its keys, then the
    /// tables inside it.
    fn table(&self, out: &mut String, level: &str, name: &str, s: &'a Value) {
        let (header, body) = match self.kind(s) {
            Kind::Table(t) => (format!("[{name}]"), t),
            Kind::Tables(t) => (format!("[[{name}]]"), t),
            Kind::Named(t) => (format!("[{name}.NAME]"), t),
            Kind::Free(_) | Kind::Key => (format!("[{name}]"), self.resolve(s)),
        };
        out.push_str(&format!("{level} `{header}`\n\n"));
        // The struct's own doc, then what the field that holds it adds.
        let own = description(body);
        push_text(out, &own, "");
        let field = description(s);
        if field != own {
            push_text(out, &field, "");
        }
        if let Kind::Free(value) = self.kind(s) {
            out.push_str(&format!("- `NAME` ({})\n", self.type_name(value)));
            if name == "prompts" {
                out.push_str(&format!(
                    "\n`NAME` is one of the templates: {}.\n",
                    Template::ALL.map(|t| format!("`{}`", t.name())).join(", ")
                ));
            }
            out.push('\n');
            return;
        }
        let props = properties(body);
        let (keys, inner): (Vec<_>, Vec<_>) = props
            .iter()
            .partition(|(_, p)| matches!(self.kind(p), Kind::Key));
        for (key, p) in &keys {
            self.key(out, key, p);
        }
        if !keys.is_empty() {
            out.push('\n');
        }
        for (key, p) in inner {
            self.table(out, &format!("{level}#"), &format!("{name}.{key}"), p);
        }
    }

    /// One key: `- `key` (type, default): doc`, the values of a choice below it.
    fn key(&self, out: &mut String, name: &str, s: &Value) {
        let t = self.resolve(s);
        let mut line = format!("- `{name}` ({}", self.type_name(s));
        // An optional key with no default (`None`) is said by its doc.
        if let Some(d) = s
            .get("default")
            .or_else(|| t.get("default"))
            .filter(|d| !d.is_null())
        {
            line.push_str(&format!(", default `{}`", toml_value(d)));
        }
        line.push(')');
        let doc = description(s);
        let doc = if doc.is_empty() && !std::ptr::eq(s, t) {
            description(t)
        } else {
            doc
        };
        let mut paragraphs = doc.split("\n\n");
        if let Some(first) = paragraphs.next().filter(|p| !p.is_empty()) {
            line.push_str(": ");
            line.push_str(&unwrap(first));
        }
        out.push_str(&line);
        out.push('\n');
        for p in paragraphs {
            out.push('\n');
            push_text(out, p, "  ");
        }
        for (value, doc) in choices(t) {
            let doc = if doc.is_empty() {
                String::new()
            } else {
                format!(": {}", unwrap(&doc))
            };
            out.push_str(&format!("  - `\"{value}\"`{doc}\n"));
        }
    }

    /// A key's type, as TOML names it.
    fn type_name(&self, s: &Value) -> String {
        let t = self.resolve(s);
        let values = choices(t);
        if !values.is_empty() {
            return values
                .iter()
                .map(|(v, _)| format!("`\"{v}\"`"))
                .collect::<Vec<_>>()
                .join(" or ");
        }
        let ty = match t.get("type") {
            Some(Value::Array(types)) => types
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap_or("any"),
            Some(Value::String(ty)) => ty.as_str(),
            _ => "any",
        };
        match ty {
            "array" => match t.get("items") {
                Some(items) => format!("array of {}", plural(&self.type_name(items))),
                None => "array".into(),
            },
            "object" => match t.get("additionalProperties").filter(|v| v.is_object()) {
                Some(v) => format!("table of {}", plural(&self.type_name(v))),
                None => "table".into(),
            },
            "number" => "float".into(),
            other => other.into(),
        }
    }
}

fn is_null(s: &Value) -> bool {
    s.get("type").and_then(Value::as_str) == Some("null")
}

/// The values of a choice (an enum of strings) with the doc of each.
fn choices(s: &Value) -> Vec<(String, String)> {
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .filter_map(Value::as_str)
            .map(|v| (v.to_owned(), String::new()))
            .collect();
    }
    let Some(alts) = s.get("oneOf").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for a in alts {
        if let Some(v) = a.get("const").and_then(Value::as_str) {
            out.push((v.to_owned(), description(a)));
        } else if let Some(vs) = a.get("enum").and_then(Value::as_array) {
            let doc = description(a);
            out.extend(
                vs.iter()
                    .filter_map(Value::as_str)
                    .map(|v| (v.to_owned(), doc.clone())),
            );
        } else {
            return Vec::new();
        }
    }
    out
}

fn plural(name: &str) -> String {
    match name {
        "string" | "integer" | "float" | "boolean" | "table" => format!("{name}s"),
        other => other.to_owned(),
    }
}

/// The properties of a table, in the order the struct declares them.
fn properties(s: &Value) -> Vec<(&String, &Value)> {
    s.get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().collect())
        .unwrap_or_default()
}

/// A schema's title and description, as Markdown paragraphs.
fn description(s: &Value) -> String {
    let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("").trim();
    let (title, desc) = (text("title"), text("description"));
    let text = match (title.is_empty(), desc.is_empty()) {
        (false, false) => format!("{title}\n\n{desc}"),
        (false, true) => title.to_owned(),
        _ => desc.to_owned(),
    };
    plain_links(&text)
}

/// Rust's intra-doc links (`[`Config`]`, `[text](crate::path)`) as plain text: the reference is
/// read outside rustdoc.
fn plain_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let inner = &after[..close];
        let tail = &after[close + 1..];
        if inner.starts_with('`') && inner.ends_with('`') {
            let target_end = tail
                .strip_prefix('(')
                .and_then(|t| t.find(')').map(|e| (e, &t[..e])));
            match target_end {
                Some((e, target)) if !target.contains('/') && !target.contains(' ') => {
                    out.push_str(inner);
                    rest = &tail[e + 2..];
                }
                Some(_) => {
                    out.push_str(&rest[open..open + close + 2]);
                    rest = tail;
                }
                None => {
                    out.push_str(inner);
                    rest = tail;
                }
            }
        } else {
            out.push('[');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// A paragraph's lines joined into one.
fn unwrap(p: &str) -> String {
    p.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Paragraphs, each on one line, after `indent`.
fn push_text(out: &mut String, text: &str, indent: &str) {
    for p in text.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
        out.push_str(indent);
        out.push_str(&unwrap(p));
        out.push_str("\n\n");
    }
}

/// A default as TOML writes it.
fn toml_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{ {} }}",
            map.iter()
                .map(|(k, v)| format!("{k} = {}", toml_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed reference is what the code generates; `R2E_BLESS=1` writes it.
    #[test]
    fn the_committed_reference_is_what_the_code_generates() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(PATH);
        let generated = markdown();
        if std::env::var_os("R2E_BLESS").is_some() {
            fs_err::write(&path, &generated).unwrap();
            return;
        }
        let committed = fs_err::read_to_string(&path).unwrap_or_default();
        if committed != generated {
            let line = committed
                .lines()
                .zip(generated.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
            panic!(
                "`{PATH}` differs from what the config structs' doc comments generate, first at line {}:\n  committed: {:?}\n  generated: {:?}\nwrite it again with `{BLESS}`",
                line + 1,
                committed.lines().nth(line).unwrap_or("<end of file>"),
                generated.lines().nth(line).unwrap_or("<end of file>"),
            );
        }
    }

    #[test]
    fn every_table_and_key_of_the_file_is_in_the_reference() {
        let md = markdown();
        for header in [
            "`[project]`",
            "`[[repo]]`",
            "`[[source]]`",
            "`[extract]`",
            "`[context]`",
            "`[env]`",
            "`[generate]`",
            "`[validate]`",
            "`[select]`",
            "`[bugfix]`",
            "`[providers.NAME]`",
            "`[prompts]`",
            "`[refine]`",
            "`[evaluate]`",
            "`[[evaluate.model]]`",
            "`[sandbox]`",
            "`[serve]`",
            "`[[variant]]`",
            "`[cache]`",
        ] {
            assert!(md.contains(&format!("## {header}")), "{header} missing");
        }
        for key in [
            "- `version` (integer",
            "- `max_tokens` (integer, default `6000`)",
            "- `strategy` (`\"naive\"` or `\"full\"` or `\"sliced\"`, default `\"sliced\"`)",
            "- `lease_seconds` (integer, default `60`)",
        ] {
            assert!(md.contains(key), "{key} missing in\n{md}");
        }
        // `[[repo]]`'s doc lists the default excludes by hand: it must list the code's.
        for glob in super::super::DEFAULT_EXCLUDE {
            assert!(md.contains(&format!("`{glob}`")), "{glob} missing");
        }
    }

    #[test]
    fn intra_doc_links_read_as_plain_text() {
        assert_eq!(
            plain_links("the [`Policy`](crate::verdict::Policy) and [`Config`], [a](b/c.md)"),
            "the `Policy` and `Config`, [a](b/c.md)"
        );
    }
}
