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
fn split(text: &str, each: impl FnMut(&str)) {
    if text.is_ascii() {
        split_ascii(text.as_bytes(), each);
    } else {
        split_regex(text, each);
    }
}

/// What the patterns' classes hold of ASCII: `\s` (Unicode's White_Space), `\p{L}`, `\p{N}`.
fn space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

fn newline(b: u8) -> bool {
    matches!(b, b'\r' | b'\n')
}

/// Neither a space, a letter nor a digit.
fn other(b: u8) -> bool {
    !space(b) && !b.is_ascii_alphanumeric()
}

/// [`split`] of ASCII text, without the regex: the patterns' alternatives tried in their order at
/// each start, as the regex's leftmost-first search does (tests compare the two).
fn split_ascii(text: &[u8], mut each: impl FnMut(&str)) {
    let run =
        |from: usize, f: fn(u8) -> bool| from + text[from..].iter().take_while(|&&b| f(b)).count();
    let mut p = 0;
    while p < text.len() {
        let b = text[p];
        let next = text.get(p + 1).copied();
        let end = if let Some(n) = contraction(&text[p..]) {
            p + n
        } else if b.is_ascii_alphabetic() {
            run(p, |b| b.is_ascii_alphabetic())
        } else if !newline(b)
            && !b.is_ascii_digit()
            && next.is_some_and(|n| n.is_ascii_alphabetic())
        {
            run(p + 1, |b| b.is_ascii_alphabetic())
        } else if b.is_ascii_digit() {
            p + text[p..]
                .iter()
                .take(3)
                .take_while(|b| b.is_ascii_digit())
                .count()
        } else if b == b' ' && next.is_some_and(other) {
            run(run(p + 1, other), newline)
        } else if other(b) {
            run(run(p, other), newline)
        } else {
            // A run of spaces: up to its last line break; else to the end of the text; else all
            // of it but its last character; else its one character.
            let q = run(p, space);
            match text[p..q].iter().rposition(|&b| newline(b)) {
                Some(k) => p + k + 1,
                None if q == text.len() => q,
                None if q - p >= 2 => q - 1,
                None => q,
            }
        };
        // Every byte of ASCII text is a character's boundary.
        each(std::str::from_utf8(&text[p..end]).expect("ASCII"));
        p = end;
    }
}

/// The length of a contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`, any case) at the
/// start of `text`, in the patterns' order.
fn contraction(text: &[u8]) -> Option<usize> {
    if text.first() != Some(&b'\'') {
        return None;
    }
    let lower = |i: usize| text.get(i).map(u8::to_ascii_lowercase);
    match (lower(1)?, lower(2)) {
        (b's' | b't' | b'm' | b'd', _) => Some(2),
        (b'r' | b'v', Some(b'e')) | (b'l', Some(b'l')) => Some(3),
        _ => None,
    }
}

/// [`split`] with the regex: any text.
fn split_regex(text: &str, mut each: impl FnMut(&str)) {
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
            include_str!("../../exec/src/py/r2e_equiv.py"),
            include_str!("../../exec/src/py/r2e_batch.py"),
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

    /// The pre-tokens of `text` by the regex.
    fn by_regex(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        super::split_regex(text, |p| out.push(p.to_owned()));
        out
    }

    fn by_scanner(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        super::split_ascii(text.as_bytes(), |p| out.push(p.to_owned()));
        out
    }

    #[test]
    fn the_ascii_scanner_splits_as_the_regex_does() {
        // Real code, then many random strings over the characters every alternative turns on.
        let same = |text: &str| {
            let (a, b) = (by_scanner(text), by_regex(text));
            if let Some(i) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) {
                let around = |v: &[String]| v[i.saturating_sub(3)..(i + 3).min(v.len())].to_vec();
                panic!(
                    "{text:?}: piece {i}: scanner {:?}, regex {:?}",
                    around(&a),
                    around(&b)
                );
            }
        };
        for text in [
            include_str!("../../exec/src/py/r2e_equiv.py"),
            include_str!("../../exec/src/py/r2e_runner.py"),
            include_str!("extract.rs"),
            include_str!("../../pipeline/src/db.rs"),
        ] {
            assert!(text.is_ascii());
            same(text);
        }
        let alphabet: &[u8] = b"aZsStTrReEvVmMlLdD09 \t\n\r\x0b\x0c'\"()+=-_.,:;#!?/\\{}[]<>@$%^&*|~`\x00\x01\x1f\x7f";
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            // xorshift64*
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        for _ in 0..20_000 {
            let len = (next() % 24) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize] as char)
                .collect();
            same(&text);
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
