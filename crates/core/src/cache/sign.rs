//! Signed remote entries (`[cache] signing_key_env`): a store every worker can write is a store
//! every worker can poison, so a lab that wants only some hosts (its CI) to write gives them a
//! key, and every reader that holds the key takes only what a key holder wrote, as Turborepo
//! signs its artifacts and Nix its narinfos.
//!
//! A signed thing in the remote store is an **envelope**, then the bytes as they would be
//! unsigned: `MAGIC` (8 bytes), the length of the signed head (4 bytes, little-endian), and an
//! HMAC-SHA256 (32 bytes) over the magic, the scope (the bucket's folder), the key, the length
//! and the head. The head is what authenticates the rest: an entry's header (its checksum
//! covers the payload), an archive's sealed header (it names its payload's length and blake3).
//!
//! A reader with the key takes a thing only when its envelope verifies; one without an
//! envelope (written by a host without the key) or with a wrong HMAC (written with another
//! key, or changed since) is a miss, named on stderr, recomputed and replaced. A reader without
//! the key strips an envelope unchecked: signing restricts who writes for the readers that
//! check, and costs the others nothing.
//!
//! The key lives in this process's memory only: read from the variable the configuration
//! names (never the key itself), never printed ([`SigningKey`]'s `Debug` hides it), never part
//! of a cache key or an output.

use ring::hmac;

use super::entry::Corrupt;
use crate::hash::Hash;

const MAGIC: &[u8; 8] = b"r2e-sig1";
/// The bytes of an envelope: magic, the head's length, the HMAC.
pub const ENVELOPE: usize = 8 + 4 + 32;
/// The shortest key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 32;

/// The key remote entries are signed and checked with.
#[derive(Clone)]
pub struct SigningKey {
    key: hmac::Key,
    /// The variable it came from, for messages.
    var: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey(from ${})", self.var)
    }
}

impl SigningKey {
    /// The key held by the environment variable `var`; an error naming the variable (never
    /// its value) when it is unset, empty or shorter than [`MIN_KEY_BYTES`].
    pub fn from_env(var: &str) -> std::result::Result<SigningKey, String> {
        let value = std::env::var_os(var).unwrap_or_default();
        let bytes = value.as_encoded_bytes();
        if bytes.is_empty() {
            return Err(format!(
                "the signing key's variable `{var}` is not set (or empty) in this environment"
            ));
        }
        if bytes.len() < MIN_KEY_BYTES {
            return Err(format!(
                "the signing key in `{var}` is too short: give at least {MIN_KEY_BYTES} bytes (e.g. `openssl rand -hex 32`)"
            ));
        }
        Ok(SigningKey::new(var, bytes))
    }

    /// A key of these bytes; `var` names where it came from.
    pub fn new(var: &str, bytes: &[u8]) -> SigningKey {
        SigningKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, bytes),
            var: var.to_owned(),
        }
    }

    /// The variable the key came from.
    pub fn var(&self) -> &str {
        &self.var
    }

    /// The envelope that signs `head` (the start of the bytes stored under `key` in `scope`).
    pub fn envelope(&self, scope: &str, key: Hash, head: &[u8]) -> [u8; ENVELOPE] {
        let tag = hmac::sign(&self.key, &signed_message(scope, key, head));
        let mut out = [0u8; ENVELOPE];
        out[..8].copy_from_slice(MAGIC);
        out[8..12].copy_from_slice(&(head.len() as u32).to_le_bytes());
        out[12..].copy_from_slice(tag.as_ref());
        out
    }

    /// Whether `tag` is this key's HMAC of `head` (compared in constant time).
    fn verify(&self, scope: &str, key: Hash, head: &[u8], tag: &[u8]) -> bool {
        hmac::verify(&self.key, &signed_message(scope, key, head), tag).is_ok()
    }
}

/// The message an HMAC covers (see the module's documentation).
fn signed_message(scope: &str, key: Hash, head: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(8 + scope.len() + 1 + 32 + 4 + head.len());
    m.extend_from_slice(MAGIC);
    m.extend_from_slice(scope.as_bytes());
    m.push(0);
    m.extend_from_slice(&key.0);
    m.extend_from_slice(&(head.len() as u32).to_le_bytes());
    m.extend_from_slice(head);
    m
}

/// What an envelope says: the length of the head it signs and its HMAC.
pub struct Envelope<'a> {
    pub head_len: usize,
    tag: &'a [u8],
}

/// The envelope at the start of `bytes`, if they start with one.
pub fn envelope_of(bytes: &[u8]) -> Option<Envelope<'_>> {
    if bytes.len() < ENVELOPE || &bytes[..8] != MAGIC {
        return None;
    }
    Some(Envelope {
        head_len: u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize,
        tag: &bytes[12..ENVELOPE],
    })
}

/// Whether `bytes` start with an envelope's magic.
pub fn is_enveloped(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && &bytes[..8] == MAGIC
}

/// Checks an envelope's HMAC over `head` with `signer`.
pub fn check(
    signer: &SigningKey,
    scope: &str,
    key: Hash,
    envelope: &Envelope<'_>,
    head: &[u8],
) -> std::result::Result<(), Corrupt> {
    if head.len() != envelope.head_len {
        return Err(Corrupt::Short);
    }
    if signer.verify(scope, key, head, envelope.tag) {
        Ok(())
    } else {
        Err(Corrupt::Signature)
    }
}

/// The bytes of a remote entry (`bytes`, as stored) without their envelope, checked against
/// `signer` when there is one: no envelope is [`Corrupt::Unsigned`], a wrong HMAC
/// [`Corrupt::Signature`]. Without a signer an envelope is stripped unchecked. `head` is the
/// length of the part a signature covers (an entry's header).
pub fn open<'a>(
    signer: Option<&SigningKey>,
    scope: &str,
    key: Hash,
    bytes: &'a [u8],
) -> std::result::Result<&'a [u8], Corrupt> {
    let Some(envelope) = envelope_of(bytes) else {
        return match signer {
            Some(_) => Err(Corrupt::Unsigned),
            None => Ok(bytes),
        };
    };
    let rest = &bytes[ENVELOPE..];
    // What an entry's envelope signs is its header: a signature of a shorter head would vouch
    // for a part of the header only.
    if envelope.head_len != super::entry::HEADER {
        return Err(Corrupt::Signature);
    }
    if rest.len() < envelope.head_len {
        return Err(Corrupt::Short);
    }
    if let Some(signer) = signer {
        check(signer, scope, key, &envelope, &rest[..envelope.head_len])?;
    }
    Ok(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::entry;

    #[test]
    fn only_the_keys_holder_signs_what_a_checking_reader_takes() {
        let key = Hash::of_bytes(b"k");
        let signer = SigningKey::new("K", b"0123456789abcdef0123456789abcdef");
        let other = SigningKey::new("K", b"another key of thirty-two bytes!");
        let sealed = entry::seal_bytes("b-v1", key, b"payload");
        let head = &sealed[..entry::HEADER];
        let mut signed = signer.envelope("b-v1", key, head).to_vec();
        signed.extend_from_slice(&sealed);

        assert_eq!(open(Some(&signer), "b-v1", key, &signed), Ok(&sealed[..]));
        // Without a key: stripped unchecked; unsigned bytes as they are.
        assert_eq!(open(None, "b-v1", key, &signed), Ok(&sealed[..]));
        assert_eq!(open(None, "b-v1", key, &sealed), Ok(&sealed[..]));
        // A checking reader: unsigned, another key, another scope or key, a changed payload
        // re-sealed with a good checksum (a forger who knows the format, not the key).
        assert_eq!(
            open(Some(&signer), "b-v1", key, &sealed),
            Err(Corrupt::Unsigned)
        );
        let mut theirs = other.envelope("b-v1", key, head).to_vec();
        theirs.extend_from_slice(&sealed);
        assert_eq!(
            open(Some(&signer), "b-v1", key, &theirs),
            Err(Corrupt::Signature)
        );
        assert_eq!(
            open(Some(&signer), "c-v1", key, &signed),
            Err(Corrupt::Signature)
        );
        assert_eq!(
            open(Some(&signer), "b-v1", Hash::of_bytes(b"j"), &signed),
            Err(Corrupt::Signature)
        );
        let forged = entry::seal_bytes("b-v1", key, b"poisoned");
        let mut changed = signed[..ENVELOPE].to_vec();
        changed.extend_from_slice(&forged);
        assert_eq!(
            open(Some(&signer), "b-v1", key, &changed),
            Err(Corrupt::Signature)
        );
        assert_eq!(
            open(Some(&signer), "b-v1", key, &signed[..ENVELOPE + 3]),
            Err(Corrupt::Short)
        );
    }

    #[test]
    fn a_key_is_read_from_its_variable_and_never_shown() {
        let k = SigningKey::new("R2E_TEST_KEY", b"thirty-two bytes of a test key!!");
        assert_eq!(format!("{k:?}"), "SigningKey(from $R2E_TEST_KEY)");
        let e = SigningKey::from_env("R2E_SURELY_UNSET_VARIABLE_42").unwrap_err();
        assert!(e.contains("R2E_SURELY_UNSET_VARIABLE_42"), "{e}");
    }
}
