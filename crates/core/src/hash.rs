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
