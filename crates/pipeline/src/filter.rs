//! The curation filters of stage `extract` (R2E's rules), applied in a fixed order; the first that
//! excludes a function names it in `excluded_by`.

use r2e_core::config::ExtractConfig;
use r2e_core::records::Filter;
use r2e_python::summary::DefLayout;

/// The first filter (all but `connectivity`, which needs the call graph) that excludes a
/// function, or `None`.
/// `code` gives the function's source text; it is read only when the keyword filter needs it.
pub fn local_filters<'t>(
    cfg: &ExtractConfig,
    name: &str,
    layout: &DefLayout,
    code: impl FnOnce() -> Option<&'t str>,
) -> Option<Filter> {
    let f = &layout.features;
    let bare = name.rsplit('.').next().unwrap_or(name);
    if cfg.no_docstring
        && layout
            .docstring
            .as_deref()
            .is_none_or(|d| d.trim().is_empty())
    {
        return Some(Filter::NoDocstring);
    }
    if cfg.dunder && bare.starts_with("__") {
        let dunder = bare.len() > 4 && bare.ends_with("__");
        // A class-private method (`__name` in a class body): Python binds it as `_Class__name`,
        // by which no harness outside the class calls it.
        let private = !bare.ends_with("__") && name.contains('.');
        if dunder || private {
            return Some(Filter::Dunder);
        }
    }
    if cfg.name_prefix {
        let lower = bare.trim_start_matches('_').to_ascii_lowercase();
        if cfg
            .prefixes
            .iter()
            .any(|p| lower.starts_with(&p.to_ascii_lowercase()))
        {
            return Some(Filter::NamePrefix);
        }
    }
    if cfg.decorator
        && f.decorators
            .iter()
            .any(|d| !cfg.allowed_decorators.contains(d))
    {
        return Some(Filter::Decorator);
    }
    if cfg.no_params && f.params == 0 {
        return Some(Filter::NoParams);
    }
    if cfg.no_return && f.value_returns == 0 {
        return Some(Filter::NoReturn);
    }
    if cfg.one_statement && f.body_statements <= 1 {
        return Some(Filter::OneStatement);
    }
    if cfg.too_long && f.lines > cfg.max_lines {
        return Some(Filter::TooLong);
    }
    if cfg.literal_returns && f.value_returns > 0 && f.literal_returns * 2 > f.value_returns {
        return Some(Filter::LiteralReturns);
    }
    if cfg.keywords {
        let lowered = layout
            .docstring
            .as_deref()
            .map(str::to_lowercase)
            .unwrap_or_default();
        let doc_words = doc_words(&lowered);
        let hit_doc = cfg.docstring_keywords.iter().any(|k| {
            let k = k.to_ascii_lowercase();
            if k.contains([' ', '-']) {
                let phrase: Vec<&str> = k.split([' ', '-']).collect();
                doc_words
                    .windows(phrase.len())
                    .any(|w| w == phrase.as_slice())
            } else {
                doc_words.contains(&k.as_str())
            }
        });
        let hit_body = !cfg.body_keywords.is_empty() && {
            let words = code().map(words).unwrap_or_default();
            cfg.body_keywords
                .iter()
                .any(|k| words.binary_search(&k.to_ascii_lowercase()).is_ok())
        };
        if hit_doc || hit_body {
            return Some(Filter::Keywords);
        }
    }
    None
}

fn doc_words(doc: &str) -> Vec<&str> {
    doc.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
}

/// Lower-cased identifier words of `text` and their `_`-separated parts, sorted and unique.
fn words(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut seen: rustc_hash::FxHashSet<&[u8]> = rustc_hash::FxHashSet::default();
    let mut i = 0;
    while i < bytes.len() {
        if !is_word(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_word(bytes[i]) {
            i += 1;
        }
        let word = &bytes[start..i];
        if word[0].is_ascii_digit() || !seen.insert(word) {
            continue;
        }
        if word.contains(&b'_') {
            seen.extend(word.split(|&b| b == b'_').filter(|p| p.len() > 1));
        }
    }
    let mut out: Vec<String> = seen
        .into_iter()
        .map(|w| String::from_utf8_lossy(w).to_ascii_lowercase())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}
