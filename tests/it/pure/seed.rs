//! The shared fixtures' own tests (`common::seed`): a seed is built once, sealed read-only, and
//! a test's copy of it links the cache's entries and copies the rest, so that nothing a test
//! does reaches the seed, or is found when it does.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::common::{self, seed};

/// A seed of a few files, no r2e in it: `repo/m.py`, `cache/.lock` and `cache/entry`.
fn tiny(name: &str) -> PathBuf {
    seed::seeded(name, "tiny", |dir| {
        std::fs::create_dir_all(dir.join("repo")).unwrap();
        std::fs::create_dir_all(dir.join("cache/actions")).unwrap();
        std::fs::write(dir.join("repo/m.py"), "x = 1\n").unwrap();
        std::fs::write(dir.join("cache/.lock"), "").unwrap();
        std::fs::write(dir.join("cache/actions/entry"), "sealed").unwrap();
        // Older than any write a test makes (a write within the same tick of the clock would
        // keep the time).
        std::fs::File::open(dir.join("cache/actions/entry"))
            .unwrap()
            .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30))
            .unwrap();
    })
}

#[test]
fn a_copy_links_the_cache_copies_the_rest_and_leaves_the_seed_as_sealed() {
    let seed = tiny("selftest-copy");
    assert_eq!(tiny("selftest-copy"), seed, "built once");
    let entry = seed.join("cache/actions/entry");
    assert!(
        std::fs::metadata(&entry).unwrap().permissions().readonly(),
        "the seed's files are read-only"
    );
    let copy = seed::Copy::of(&seed);
    let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
    assert_eq!(ino(&copy.path().join("cache/actions/entry")), ino(&entry));
    for own in ["cache/.lock", "repo/m.py"] {
        assert_ne!(ino(&copy.path().join(own)), ino(&seed.join(own)), "{own}");
    }
    // What a test and r2e do in a copy: write its own files, replace an entry by a rename.
    std::fs::write(copy.path().join("repo/m.py"), "x = 2\n").unwrap();
    let tmp = copy.path().join("cache/actions/entry.tmp");
    std::fs::write(&tmp, "another").unwrap();
    std::fs::rename(&tmp, copy.path().join("cache/actions/entry")).unwrap();
    drop(copy);
    assert_eq!(std::fs::read_to_string(&entry).unwrap(), "sealed");
    assert_eq!(
        std::fs::read_to_string(seed.join("repo/m.py")).unwrap(),
        "x = 1\n"
    );
}

#[test]
fn a_write_in_place_through_a_copys_link_fails_or_is_found() {
    let seed = tiny("selftest-write");
    let copy = copy_into_new(&seed);
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .open(copy.join("cache/actions/entry"));
    match opened {
        Err(e) => {
            // Not root: the write bits count, and the write fails at once.
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
            assert!(!common::is_root());
        }
        Ok(mut file) => {
            use std::io::Write;
            file.write_all(b"SEALED").unwrap();
            drop(file);
            let found = std::panic::catch_unwind(|| seed::verify(&seed));
            // Made again by the next run that asks for it.
            seed::remove(&seed);
            let why = *found
                .expect_err("verify finds the write")
                .downcast::<String>()
                .unwrap();
            assert!(why.contains("written in place"), "{why}");
        }
    }
    seed::remove(&copy);
}

/// A copy of `seed` in a new folder beside it, for a test that must not verify it on drop.
fn copy_into_new(seed: &Path) -> PathBuf {
    let dir = tempfile::Builder::new()
        .prefix("copy-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
        .keep();
    seed::copy_into(seed, &dir);
    dir
}
