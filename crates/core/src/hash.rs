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

/// Counts and hashes (blake3) what is written or read through it: an archive's payload, as it
/// is packed and as it is unpacked.
pub struct Hashing<T> {
    inner: T,
    hasher: blake3::Hasher,
    len: u64,
}

impl<T> Hashing<T> {
    pub fn new(inner: T) -> Self {
        Hashing {
            inner,
            hasher: blake3::Hasher::new(),
            len: 0,
        }
    }

    /// The bytes that passed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no byte passed yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The blake3 hash of the bytes that passed so far.
    pub fn hash(&self) -> [u8; 32] {
        *self.hasher.finalize().as_bytes()
    }

    /// The reader or writer it wraps.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl<W: std::io::Write> std::io::Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<R: std::io::Read> std::io::Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}
