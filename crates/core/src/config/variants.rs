//! `[[variant]]`: each variant's keys merged over the pipeline's tables, resolved into a whole
//! configuration, its errors located inside the variant's own text.

use std::ops::Range;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::checks::check_stages;
use super::locate::{Source, find_dotted_key, find_section_key};
use super::models::prompt_file;
use super::{Config, Variant};
use crate::error::{Error, Result};

/// `[[variant]]`: an ablation. Each variant overrides stage settings of the pipeline's tables,
/// merged key by key over them (written `context.strategy = "naive"`, or under
/// `[variant.context]`), and builds into `<output>/variants/NAME/`.
///
/// One build computes every variant and shares every action whose inputs are the same:
/// checkout, parsing and environments once; extraction once per distinct `[extract]`, contexts
/// once per distinct `[context]`; harnesses, validations and model answers through the action
/// cache (`examples/ablation.toml` is a three-variant example; run `r2e report -p
/// examples/ablation.toml` after building it).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct VariantOptions {
    /// The variant's name, which names its folder: letters, digits, `_`, `-` and `.` (not
    /// first).
    #[schemars(with = "String")]
    name: Spanned<String>,
    /// Keys of `[extract]`.
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
    extract: Option<Spanned<toml::Table>>,
    /// Keys of `[context]`.
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
    context: Option<Spanned<toml::Table>>,
    /// Keys of `[generate]`.
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
    generate: Option<Spanned<toml::Table>>,
    /// Keys of `[select]`.
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
    select: Option<Spanned<toml::Table>>,
    /// Keys of `[bugfix]` (a variant with some makes bug-fix tasks, from the pipeline's
    /// `[bugfix]` with these keys over it).
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
    bugfix: Option<Spanned<toml::Table>>,
    /// Keys of `[refine]`.
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
    refine: Option<Spanned<toml::Table>>,
    /// Keys of `[evaluate]`; its `model` list replaces the pipeline's.
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
    evaluate: Option<Spanned<toml::Table>>,
    /// Entries of `[prompts]`.
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
    prompts: Option<Spanned<toml::Table>>,
}

/// The `[[variant]]` tables: each the pipeline's tables with the variant's keys merged over
/// them.
pub(super) fn variants(
    src: &Source,
    base: &Path,
    cfg: &Config,
    options: Vec<Spanned<VariantOptions>>,
) -> Result<Vec<Variant>> {
    let doc: toml::Table = src
        .text
        .parse()
        .map_err(|e: toml::de::Error| src.at(e.span(), e.message()))?;
    let mut variants: Vec<Variant> = Vec::new();
    for v in options {
        let span = v.span();
        let v = v.into_inner();
        let vname = v.name.get_ref().clone();
        let valid_name = !vname.is_empty()
            && vname
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && !vname.starts_with('.');
        if !valid_name {
            return Err(src.at(
                Some(v.name.span()),
                "a variant name must be non-empty and hold only letters, digits, `_`, `-` and `.` (it names a folder)",
            ));
        }
        if variants.iter().any(|o| o.name == vname) {
            return Err(src.at(
                Some(v.name.span()),
                &format!("two variants are named `{vname}`"),
            ));
        }
        let located = InVariant {
            src,
            name: &vname,
            span: variant_span(src.text, span),
        };
        let vcfg = variant_config(&located, base, cfg, &doc, &v)?;
        variants.push(Variant {
            name: vname,
            cfg: vcfg,
        });
    }
    Ok(variants)
}

/// A variant's text: from its header to the next table that is not one of its own.
fn variant_span(text: &str, span: Range<usize>) -> Range<usize> {
    let body_start = text[span.start..]
        .find('\n')
        .map_or(text.len(), |i| span.start + i + 1);
    let mut end = body_start;
    for line in text[body_start..].split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('[') && !t.starts_with("[variant.") {
            break;
        }
        end += line.len();
    }
    span.start..end
}

/// Locates errors inside one variant's text.
struct InVariant<'a> {
    src: &'a Source<'a>,
    name: &'a str,
    span: Range<usize>,
}

impl InVariant<'_> {
    /// A key is looked for as `section.key`, under `[variant.section]`, then by itself; a whole
    /// section (an empty key) as `section.` or its `[variant.section]` header.
    fn at(&self, section: &str, key: &str, msg: &str) -> Error {
        let span = &self.span;
        let body = &self.src.text[span.clone()];
        let header = format!("[variant.{section}]");
        let local = if key.is_empty() {
            find_dotted_key(body, section)
                .or_else(|| body.find(&header).map(|at| at + 1..at + header.len() - 1))
        } else {
            find_dotted_key(body, &format!("{section}.{key}"))
                .map(|r| r.end - key.len()..r.end)
                .or_else(|| {
                    body.contains(&header)
                        .then(|| find_section_key(body, &format!("variant.{section}"), key))
                        .flatten()
                })
                .or_else(|| find_dotted_key(body, key))
        };
        let local = local.map(|r| r.start + span.start..r.end + span.start);
        self.src.at(
            local.or(Some(span.clone())),
            &format!("variant `{}`: {msg}", self.name),
        )
    }
}

/// One variant's whole configuration.
fn variant_config(
    located: &InVariant,
    base: &Path,
    cfg: &Config,
    doc: &toml::Table,
    v: &VariantOptions,
) -> Result<Config> {
    let bad = |section: &str, e: toml::de::Error| {
        located.at(section, "", &format!("`{section}`: {}", e.message()))
    };
    let mut vcfg = cfg.clone();
    vcfg.output = cfg.output.join("variants").join(located.name);
    if let Some(t) = merged(doc, "extract", &v.extract) {
        vcfg.extract = t.try_into().map_err(|e| bad("extract", e))?;
    }
    if let Some(t) = merged(doc, "context", &v.context) {
        vcfg.context = t.try_into().map_err(|e| bad("context", e))?;
    }
    if let Some(t) = merged(doc, "generate", &v.generate) {
        vcfg.generate = t.try_into().map_err(|e| bad("generate", e))?;
    }
    if let Some(t) = merged(doc, "select", &v.select) {
        vcfg.select = t.try_into().map_err(|e| bad("select", e))?;
    }
    if let Some(t) = merged(doc, "bugfix", &v.bugfix) {
        vcfg.bugfix = Some(t.try_into().map_err(|e| bad("bugfix", e))?);
    }
    if let Some(t) = merged(doc, "refine", &v.refine) {
        vcfg.refine = t.try_into().map_err(|e| bad("refine", e))?;
    }
    if let Some(t) = merged(doc, "evaluate", &v.evaluate) {
        vcfg.evaluate = t.try_into().map_err(|e| bad("evaluate", e))?;
    }
    if let Some(over) = &v.prompts {
        for (pname, path) in over.get_ref() {
            let Some(path) = path.as_str() else {
                return Err(located.at("prompts", pname, "a prompt is the path of a file"));
            };
            let entry =
                prompt_file(base, pname, path).map_err(|m| located.at("prompts", pname, &m))?;
            vcfg.prompts.retain(|(n, _)| n.name() != pname);
            vcfg.prompts.push(entry);
        }
        vcfg.prompts.sort();
    }
    check_stages(&vcfg, &|section, key, msg| located.at(section, key, msg))?;
    Ok(vcfg)
}

/// The pipeline's `section` table with a variant's keys put over it, when the variant has any.
fn merged(
    doc: &toml::Table,
    section: &str,
    over: &Option<Spanned<toml::Table>>,
) -> Option<toml::Value> {
    let over = over.as_ref()?;
    let mut table = doc
        .get(section)
        .and_then(|v| v.as_table())
        .cloned()
        .unwrap_or_default();
    for (k, v) in over.get_ref() {
        table.insert(k.clone(), v.clone());
    }
    Some(toml::Value::Table(table))
}
