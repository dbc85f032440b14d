//! Parse outcomes stored many to a cache entry.
//!
//! A cold build of a large repository parses thousands of files. Stored one entry each
//! (`keys::ParseKey`), the kernel's work of creating that many files was a large part of the
//! cold build (see `bench/README.md`). So while `engine::memo::parse_repo` parses a
//! repository's changed files, and they are many ([`PACK_MIN`]), the outcomes are collected and
//! written as one entry, a [`ParsePack`] (`keys::ParsePackKey`), whose key the repository's
//! pack list records (`engine::memo::PackList`). A later build registers the packs it names; `db::parse_file`
//! reads a file's own entry first, then the registered packs, loaded on the first miss and
//! read in place (only the outcomes asked for are decoded).
//!
//! A pack is an action result like any other: sealed and verified as a whole, noted as used
//! when read, removed by `r2e gc` like a parse entry. A damaged or missing pack is a miss: the
//! files are parsed again. A build killed while collecting loses that repository's parse work,
//! never a result.

use std::sync::{Arc, Mutex};

use r2e_core::cache::{ActionKey, Cache};
use r2e_core::hash::Hash;
use r2e_core::keys::{PARSER, ParsePackKey, SUMMARY_FORMAT};
use r2e_python::summary::ModuleSummary;

/// A parse stage that parses fewer files than this stores them one entry each.
pub const PACK_MIN: usize = 64;

/// A parse outcome as stored: a summary, or why the bytes could not be decoded or parsed.
pub type Stored = Result<ModuleSummary, String>;

/// Bytes of an index row: a content hash, the outcome's offset and its length.
const ROW: usize = 32 + 8 + 8;

/// A pack's payload, read in place: `count` (u64, little-endian), then `count` index rows
/// sorted by content hash (hash, offset, length; offsets from the end of the index), then the
/// outcomes, each encoded as a `ParseKey` entry's payload is.
pub struct ParsePack {
    bytes: Vec<u8>,
    count: usize,
}

impl ParsePack {
    /// Sorts outcomes by content hash, one per content, and returns the hash of the contents:
    /// what the pack's key is made of.
    fn order(outcomes: &mut Vec<(Hash, Vec<u8>)>) -> Hash {
        outcomes.sort_by_key(|o| o.0);
        outcomes.dedup_by(|a, b| a.0 == b.0);
        let mut h = blake3::Hasher::new();
        for (content, _) in outcomes.iter() {
            h.update(&content.0);
        }
        Hash(*h.finalize().as_bytes())
    }

    /// The payload of outcomes put in order by [`ParsePack::order`].
    fn lay_out(outcomes: Vec<(Hash, Vec<u8>)>) -> Vec<u8> {
        let mut index = Vec::with_capacity(8 + outcomes.len() * ROW);
        index.extend_from_slice(&(outcomes.len() as u64).to_le_bytes());
        let mut offset = 0u64;
        for (content, bytes) in &outcomes {
            index.extend_from_slice(&content.0);
            index.extend_from_slice(&offset.to_le_bytes());
            index.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            offset += bytes.len() as u64;
        }
        let mut payload = index;
        payload.reserve(offset as usize);
        for (_, bytes) in &outcomes {
            payload.extend_from_slice(bytes);
        }
        payload
    }

    /// A pack read back; `None` when the payload is not laid out as [`ParsePack::lay_out`] makes
    /// it (it verified, so only another format could do that).
    pub fn decode(bytes: Vec<u8>) -> Option<ParsePack> {
        let count = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?) as usize;
        let end = count.checked_mul(ROW)?.checked_add(8)?;
        (bytes.len() >= end).then_some(ParsePack { bytes, count })
    }

    fn row(&self, i: usize) -> (&[u8], u64, u64) {
        let r = &self.bytes[8 + i * ROW..8 + (i + 1) * ROW];
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        (&r[..32], word(&r[32..40]), word(&r[40..48]))
    }

    /// The index row of these contents, if the pack holds them.
    fn position(&self, content: Hash) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.row(mid).0.cmp(&content.0[..]) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// The outcome stored for these contents, if the pack holds it.
    pub fn get(&self, content: Hash) -> Option<Stored> {
        let (_, offset, len) = self.row(self.position(content)?);
        let start = (8 + self.count * ROW).checked_add(usize::try_from(offset).ok()?)?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        postcard::from_bytes(self.bytes.get(start..end)?).ok()
    }
}

/// The key of a pack of files with these contents.
pub fn key(contents: Hash) -> ParsePackKey {
    ParsePackKey {
        parser: PARSER,
        summary_format: SUMMARY_FORMAT,
        contents,
    }
}

/// The packs a build may read, and the outcomes it is collecting into a new one.
#[derive(Default)]
pub struct Packs {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Every pack registered (key hashes), and those not read yet.
    registered: Vec<Hash>,
    pending: Vec<Hash>,
    loaded: Vec<Arc<ParsePack>>,
    /// While a parse stage collects: (content hash, encoded outcome).
    collecting: Option<Vec<(Hash, Vec<u8>)>>,
    /// The pack being laid out and written while the build goes on: its key and the thread
    /// (which gives the pack back once it is stored).
    writing: Option<(Hash, std::thread::JoinHandle<Option<ParsePack>>)>,
}

impl Packs {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes these packs (key hashes, as a pack list records them) readable by this build.
    pub fn register(&self, keys: &[Hash]) {
        let mut st = self.state();
        for k in keys {
            if !st.registered.contains(k) {
                st.registered.push(*k);
                st.pending.push(*k);
            }
        }
    }

    /// The outcome a registered pack holds for these contents.
    pub fn find(&self, cache: &Cache, content: Hash) -> Option<Stored> {
        self.loaded(cache).iter().find_map(|p| p.get(content))
    }

    /// Whether a registered pack holds these contents (nothing decoded).
    pub fn contains(&self, cache: &Cache, content: Hash) -> bool {
        self.loaded(cache)
            .iter()
            .any(|p| p.position(content).is_some())
    }

    /// The registered packs, read on the first call after they were registered.
    fn loaded(&self, cache: &Cache) -> Vec<Arc<ParsePack>> {
        {
            let mut st = self.state();
            for k in std::mem::take(&mut st.pending) {
                let bucket = <ParsePackKey as ActionKey>::BUCKET;
                if let Some(pack) = cache.get_bytes(bucket, k).and_then(ParsePack::decode) {
                    st.loaded.push(Arc::new(pack));
                }
            }
            st.loaded.clone()
        }
    }

    /// Starts collecting the outcomes parsed from now on, instead of storing each.
    pub fn start(&self) {
        self.state().collecting = Some(Vec::new());
    }

    /// Keeps `outcome` for the pack being collected; `false` when none is (store it alone).
    pub fn collect(&self, content: Hash, outcome: &Stored) -> bool {
        if self.state().collecting.is_none() {
            return false;
        }
        let bytes = postcard::to_stdvec(outcome).expect("summaries serialize");
        match self.state().collecting.as_mut() {
            Some(into) => {
                into.push((content, bytes));
                true
            }
            None => false,
        }
    }

    /// Stops collecting and stores what was collected as one pack, on a thread of its own:
    /// returns the pack's key's hash at once, or `None` when nothing was collected. The build
    /// goes on while the pack is laid out and written; [`Packs::wait`] waits for it. A pack
    /// named by a pack list before it is written (or whose write failed: a warning says so) is
    /// a miss, as a damaged one is: its outcomes are parsed again by a later build.
    pub fn finish(&self, cache: &Arc<Cache>) -> Option<Hash> {
        self.wait();
        let mut collected = self.state().collecting.take()?;
        if collected.is_empty() {
            return None;
        }
        let key = key(ParsePack::order(&mut collected)).hash();
        let cache = cache.clone();
        let write = move || {
            let payload = ParsePack::lay_out(collected);
            match cache.put_bytes(<ParsePackKey as ActionKey>::BUCKET, key, &payload) {
                Ok(()) => ParsePack::decode(payload),
                Err(e) => {
                    eprintln!("warning: cannot store parse results: {e}");
                    None
                }
            }
        };
        match std::thread::Builder::new()
            .name("r2e-pack".into())
            .spawn(write)
        {
            Ok(thread) => {
                self.state().writing = Some((key, thread));
                Some(key)
            }
            Err(e) => {
                eprintln!("warning: cannot store parse results: {e}");
                None
            }
        }
    }

    /// Waits until the pack [`Packs::finish`] started is written (a build waits before it
    /// records the entries it used); it is then readable from this build's memory too.
    pub fn wait(&self) {
        let Some((key, thread)) = self.state().writing.take() else {
            return;
        };
        let Ok(Some(pack)) = thread.join() else {
            return;
        };
        let mut st = self.state();
        if !st.registered.contains(&key) {
            st.registered.push(key);
            st.loaded.push(Arc::new(pack));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pack_gives_back_each_outcome_and_nothing_else() {
        let summary = r2e_python::extract::summarize("def f(x):\n    return x\n").unwrap();
        let outcomes: Vec<(Hash, Stored)> = vec![
            (Hash::of_bytes(b"b"), Ok(summary)),
            (Hash::of_bytes(b"a"), Err("cannot decode".into())),
        ];
        let mut encoded: Vec<_> = outcomes
            .iter()
            .map(|(h, o)| (*h, postcard::to_stdvec(o).unwrap()))
            .collect();
        let contents = ParsePack::order(&mut encoded);
        let pack = ParsePack::decode(ParsePack::lay_out(encoded)).unwrap();
        for (h, o) in &outcomes {
            assert_eq!(pack.get(*h).as_ref(), Some(o));
        }
        assert!(pack.get(Hash::of_bytes(b"c")).is_none());
        // The key names the contents, whatever order they were parsed in.
        let mut again: Vec<_> = outcomes
            .iter()
            .rev()
            .map(|(h, o)| (*h, postcard::to_stdvec(o).unwrap()))
            .collect();
        assert_eq!(ParsePack::order(&mut again), contents);
        assert!(
            ParsePack::decode(vec![9; 8]).is_none(),
            "an index longer than the payload"
        );
    }

    #[test]
    fn collected_outcomes_are_stored_as_one_entry_and_found_by_a_later_build() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(Cache::open(dir.path()).unwrap());
        let ok: Stored = r2e_python::extract::summarize("x = 1\n").map_err(|e| e.to_string());
        let packs = Packs::default();
        assert!(!packs.collect(Hash::of_bytes(b"1"), &ok), "not collecting");
        packs.start();
        for i in 0..3u8 {
            assert!(packs.collect(Hash::of_bytes(&[i]), &ok));
        }
        let key = packs.finish(&cache).unwrap();
        assert!(packs.finish(&cache).is_none(), "collecting stopped");
        // `finish` waited for the pack's write: it is stored.
        let bucket = <ParsePackKey as ActionKey>::BUCKET;
        assert!(cache.contains(bucket, key));
        let later = Packs::default();
        later.register(&[key]);
        assert_eq!(later.find(&cache, Hash::of_bytes(&[2])), Some(ok));
        assert_eq!(later.find(&cache, Hash::of_bytes(b"9")), None);
        // A damaged pack is a miss (and is removed).
        let mut bytes = cache.store().get(bucket, key).unwrap().unwrap().bytes;
        let n = bytes.len() - 1;
        bytes[n] ^= 1;
        cache.store().put(bucket, key, &[&bytes]).unwrap();
        let damaged = Packs::default();
        damaged.register(&[key]);
        assert_eq!(damaged.find(&cache, Hash::of_bytes(&[2])), None);
        assert!(!cache.contains(bucket, key));
    }
}
