//! Self-verifying entries: every stored thing holds its own key next to its value, under one
//! checksum, as Bazel's remote cache and Nix's store address an entry by what produced it and
//! check it on read.
//!
//! Layout: `MAGIC` (8 bytes), the key (32 bytes), the checksum (32 bytes: blake3 over the magic,
//! the bucket's name, the key and the payload), then the payload (postcard). A read that finds a
//! short file, another magic, a wrong checksum or another key gets a [`Corrupt`], never a value.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::hash::Hash;

const MAGIC: &[u8; 8] = b"r2e-ent1";
/// The bytes of an entry before its payload.
pub const HEADER: usize = 8 + 32 + 32;

/// Why stored bytes are not the entry asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Corrupt {
    #[error("it is shorter than an entry's header")]
    Short,
    #[error("it is not an r2e entry")]
    Magic,
    #[error("its checksum does not match its contents")]
    Checksum,
    #[error("it holds the entry of another key")]
    WrongKey,
    #[error("its value cannot be decoded")]
    Decode,
    /// A remote entry without a signature, read by a host that checks them.
    #[error("it carries no signature: a host without the signing key wrote it")]
    Unsigned,
    /// A remote entry whose signature is not the signing key's HMAC of it.
    #[error("its signature does not match: it was signed with another key, or changed since")]
    Signature,
}

fn checksum(scope: &str, key: &Hash, payload: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(MAGIC);
    h.update(scope.as_bytes());
    h.update(&[0]);
    h.update(&key.0);
    h.update(payload);
    *h.finalize().as_bytes()
}

/// The bytes of an entry holding `payload` under `key`, in `scope` (a bucket's folder name, or
/// another name for entries kept outside the cache).
pub fn seal_bytes(scope: &str, key: Hash, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&header(scope, key, payload));
    out.extend_from_slice(payload);
    out
}

/// The header an entry holding `payload` starts with; the payload follows it (written after it
/// as it is, a large payload is not copied).
pub fn header(scope: &str, key: Hash, payload: &[u8]) -> [u8; HEADER] {
    let mut out = [0u8; HEADER];
    out[..8].copy_from_slice(MAGIC);
    out[8..40].copy_from_slice(&key.0);
    out[40..].copy_from_slice(&checksum(scope, &key, payload));
    out
}

/// The payload of an entry, when it is whole and holds `key`.
pub fn unseal_bytes<'a>(scope: &str, key: Hash, bytes: &'a [u8]) -> Result<&'a [u8], Corrupt> {
    if bytes.len() < HEADER {
        return Err(Corrupt::Short);
    }
    if &bytes[..8] != MAGIC {
        return Err(Corrupt::Magic);
    }
    let stored = Hash(bytes[8..40].try_into().expect("32 bytes"));
    let payload = &bytes[HEADER..];
    if bytes[40..72] != checksum(scope, &stored, payload) {
        return Err(Corrupt::Checksum);
    }
    if stored != key {
        return Err(Corrupt::WrongKey);
    }
    Ok(payload)
}

/// [`seal_bytes`] of a value.
pub fn seal<T: Serialize + ?Sized>(scope: &str, key: Hash, value: &T) -> Vec<u8> {
    let payload = postcard::to_stdvec(value).expect("cache values serialize");
    seal_bytes(scope, key, &payload)
}

/// [`unseal_bytes`] of a value.
pub fn unseal<T: DeserializeOwned>(scope: &str, key: Hash, bytes: &[u8]) -> Result<T, Corrupt> {
    postcard::from_bytes(unseal_bytes(scope, key, bytes)?).map_err(|_| Corrupt::Decode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_damage_is_caught() {
        let (a, b) = (Hash::of_bytes(b"a"), Hash::of_bytes(b"b"));
        let entry = seal("x-v1", a, &("value".to_string(), 7u32));
        assert_eq!(
            unseal::<(String, u32)>("x-v1", a, &entry).unwrap(),
            ("value".to_string(), 7)
        );
        // Another key's entry (a swapped file), another bucket, a flipped bit, a torn write.
        assert_eq!(
            unseal::<(String, u32)>("x-v1", b, &entry),
            Err(Corrupt::WrongKey)
        );
        assert_eq!(
            unseal::<(String, u32)>("y-v1", a, &entry),
            Err(Corrupt::Checksum)
        );
        for at in [0, 9, 45, entry.len() - 1] {
            let mut flipped = entry.clone();
            flipped[at] ^= 0x10;
            assert!(
                unseal::<(String, u32)>("x-v1", a, &flipped).is_err(),
                "{at}"
            );
        }
        assert!(unseal::<(String, u32)>("x-v1", a, &entry[..entry.len() - 1]).is_err());
        assert_eq!(
            unseal::<(String, u32)>("x-v1", a, &entry[..10]),
            Err(Corrupt::Short)
        );
    }
}
