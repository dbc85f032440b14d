//! Content hashes: blake3 over bytes, and over serializable key structs.

use serde::Serialize;

/// A blake3 digest.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Hash(*blake3::hash(bytes).as_bytes())
    }

    /// The hash of a key struct, through its canonical JSON form (struct fields in declaration
    /// order, so a key's hash changes only when its contents or its shape change).
    pub fn of_key<K: Serialize + ?Sized>(key: &K) -> Self {
        let json = serde_json::to_vec(key).expect("key structs serialize");
        Self::of_bytes(&json)
    }

    /// The hash whose hex text is `text` (64 hex digits), as [`Hash::to_hex`] writes it.
    pub fn from_hex(text: &str) -> Option<Self> {
        if text.len() != 64 || !text.is_ascii() {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Hash(out))
    }

    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }
}

/// Serializes a hash as its hex text (`#[serde(serialize_with = "hash::hex")]`): for what is
/// shown, never for a key, whose canonical form is the derived one.
pub fn hex<S: serde::Serializer>(hash: &Hash, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hash.to_hex())
}

impl std::fmt::Debug for Hash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", &self.to_hex()[..16])
    }
}

impl std::fmt::Display for Hash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}
