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

use std::cell::RefCell;
use std::collections::HashMap;

/// Pre-tokens remembered per thread before the memo is cleared.
const MEMO_LIMIT: usize = 1 << 20;

thread_local! {
    static MEMO: RefCell<HashMap<Box<str>, u32>> = RefCell::new(HashMap::new());
}

/// Tokens in `text`.
pub fn count(text: &str) -> u32 {
    let tokenizer = bpe_openai::cl100k_base();
    MEMO.with_borrow_mut(|memo| {
        if memo.len() > MEMO_LIMIT {
            memo.clear();
        }
        let mut total = 0u32;
        for piece in tokenizer.split(text) {
            total += match memo.get(piece) {
                Some(&n) => n,
                None => {
                    let n = tokenizer.bpe.count(piece.as_bytes()) as u32;
                    memo.insert(piece.into(), n);
                    n
                }
            };
        }
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
