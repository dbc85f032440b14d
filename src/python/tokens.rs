//! Token counts with a real BPE tokenizer (OpenAI's `cl100k_base`, GPT-4's), used to cut contexts
//! to `max_tokens`.
//!
//! Counts are additive over chunks of whole lines: `cl100k_base`'s pre-tokenizer never joins a
//! line terminator with the first non-blank line after it, so the count of a context rendered
//! from chunks that each end in a newline and start with a non-blank line is the sum of the
//! chunks' counts. A test checks this on real code.
//!
//! Source code repeats its pre-tokens (identifiers, indentation, operators) endlessly, so each
//! thread memoizes the BPE count of every pre-token it has seen.
//!
//! Each thread also splits text into pre-tokens with a regex and a search cache of its own:
//! `bpe_openai`'s splitter shares one regex, whose cache pool every other thread takes and puts
//! back through a lock once per pre-token. The patterns are `cl100k_base`'s as `bpe_openai`
//! builds them (its negative look-ahead `\s+(?!\S)` written as a pattern whose one look-ahead
//! character is dropped from the match); tests compare the counts with `bpe_openai`'s own.

use std::cell::RefCell;

use regex_automata::meta::{Cache, Regex};
use regex_automata::{Anchored, Input};
use rustc_hash::FxHashMap;

/// Pre-tokens remembered per thread before the memo is cleared.
const MEMO_LIMIT: usize = 1 << 20;

/// `cl100k_base`'s pre-tokenizer: each pattern, and whether its last character is a look-ahead.
const PATTERNS: [(&str, bool); 3] = [
    (
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+$",
        false,
    ),
    ("\\s+\\s", true),
    ("\\s+", false),
];

struct Splitter {
    regex: Regex,
    cache: Cache,
}

thread_local! {
    static MEMO: RefCell<FxHashMap<Box<str>, u32>> = RefCell::new(FxHashMap::default());
    static SPLITTER: RefCell<Splitter> = RefCell::new({
        let regex = Regex::new_many(&PATTERNS.map(|(p, _)| p)).expect("cl100k_base's patterns");
        let cache = regex.create_cache();
        Splitter { regex, cache }
    });
}

/// Calls `each` with every pre-token of `text`, in order.
fn split(text: &str, mut each: impl FnMut(&str)) {
    SPLITTER.with_borrow_mut(|s| {
        let mut last = 0;
        while last < text.len() {
            let input = Input::new(&text[last..]).anchored(Anchored::Yes);
            let Some(m) = s.regex.search_with(&mut s.cache, &input) else {
                break;
            };
            let start = last;
            let mut end = last + m.range().end;
            if PATTERNS[m.pattern().as_usize()].1 {
                let dropped = text[start..end]
                    .chars()
                    .next_back()
                    .map_or(0, char::len_utf8);
                end -= dropped;
            }
            if end == start {
                break;
            }
            each(&text[start..end]);
            last = end;
        }
    })
}

/// Tokens in `text`.
pub fn count(text: &str) -> u32 {
    let bpe = &bpe_openai::cl100k_base().bpe;
    MEMO.with_borrow_mut(|memo| {
        if memo.len() > MEMO_LIMIT {
            memo.clear();
        }
        let mut total = 0u32;
        split(text, |piece| {
            total += match memo.get(piece) {
                Some(&n) => n,
                None => {
                    let n = bpe.count(piece.as_bytes()) as u32;
                    memo.insert(piece.into(), n);
                    n
                }
            };
        });
        total
    })
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn memoized_counts_match_the_tokenizer() {
        let text = "def f(x):\n    return x + 1  # done\n\nclass C:\n    pass\n";
        let direct = bpe_openai::cl100k_base().count(text) as u32;
        assert_eq!(count(text), direct);
        assert_eq!(count(text), direct, "second, memoized count");
    }

    #[test]
    fn counts_match_the_tokenizer_on_real_and_odd_text() {
        // r2e's own Python and Rust sources, and text that exercises every pattern: contractions,
        // digits, runs of spaces before text and at the end, tabs, CRLF, non-ASCII letters and
        // symbols.
        let texts = [
            include_str!("../py/r2e_equiv.py"),
            include_str!("../py/r2e_batch.py"),
            include_str!("tokens.rs"),
            "it's 12345 o'clock   \t  x\r\n\r\n  y  \n\n   ",
            "Ünïcödé naïve café — 東京 🙂 ß  ẞ 12,5 €\n\t\t\n",
            "   leading and trailing   ",
            "",
            " ",
            "\n",
        ];
        for text in texts {
            assert_eq!(
                count(text),
                bpe_openai::cl100k_base().count(text) as u32,
                "{text:?}"
            );
        }
    }

    #[test]
    fn counts_add_up_over_line_chunks() {
        // Chunks of whole lines, each starting with a non-blank line.
        let chunks = [
            "# file: a.py\n",
            "class C(Base):\n",
            "    \"\"\"Doc.\"\"\"\n    x = 1\n",
            "    def m(self, y):\n        return y  \n\n",
            "def g():\n\treturn '\\n'\n",
            "X = {1: 2}\r\n",
            "    @decorator\n    def n(self):\n        pass\n",
        ];
        let joined: String = chunks.concat();
        let sum: u32 = chunks.iter().map(|c| count(c)).sum();
        assert_eq!(bpe_openai::cl100k_base().count(joined.as_str()) as u32, sum);
    }
}
