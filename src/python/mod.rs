//! Python analysis: decoding, parsing, per-module summaries, module resolution, dependency slices
//! and token counts.
//!
//! Architecture invariant: this module is pure. It knows nothing about salsa, the cache, the
//! file system or the configuration file; text goes in and plain data comes out.

pub mod decode;
pub mod docstring;
pub mod extract;
pub mod mutate;
pub mod resolve;
pub mod summary;
pub mod tokens;

/// Removes the common leading white space of the non-blank lines (as `textwrap.dedent` does for
/// uniformly indented code); the result ends with a newline.
pub fn dedent(text: &str) -> String {
    let margin = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out: String = text
        .lines()
        .map(|l| {
            if l.len() >= margin {
                &l[margin..]
            } else {
                l.trim_start()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.push('\n');
    out
}
