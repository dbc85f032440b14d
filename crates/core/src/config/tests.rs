//! Unit tests of the config: parsing, the errors and the places they name (file, line, column).

use super::*;

pub(super) fn err(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    fs_err::create_dir(dir.path().join("repo")).unwrap();
    let file = dir.path().join("pipeline.toml");
    match parse(text, &file) {
        Ok(_) => panic!("expected an error for {text}"),
        Err(e) => {
            assert_eq!(e.exit_code(), 2);
            e.to_string().replace(&file.display().to_string(), "P")
        }
    }
}

#[test]
fn a_pypi_release_is_one_exact_version_alone_with_its_hash_and_index() {
    let e = err("[[repo]]\npypi = \"isodate>=0.6\"\n");
    assert!(
        e.starts_with("P:2:8: `isodate>=0.6` is not a release"),
        "{e}"
    );
    let e = err("[[repo]]\npypi = \"isodate==0.6.*\"\n");
    assert!(
        e.starts_with("P:2:8:") && e.contains("`0.6.*` is not one exact version"),
        "{e}"
    );
    let e = err("[[repo]]\npypi = \"-bad==1\"\n");
    assert!(
        e.starts_with("P:2:8:") && e.contains("not a project name"),
        "{e}"
    );
    let e = err("[[repo]]\npypi = \"isodate==0.6.1\"\nsha256 = \"abc\"\n");
    assert!(
        e.starts_with("P:3:10: `sha256` is the archive's SHA-256"),
        "{e}"
    );
    let e = err("[[repo]]\npypi = \"isodate==0.6.1\"\ngit = \"https://h/r\"\n");
    assert!(e.starts_with("P:3:7: a repo takes `pypi` or `git`"), "{e}");
    let e = err("[[repo]]\npath = \"repo\"\nsha256 = \"abc\"\n");
    assert!(e.starts_with("P:3:10: `sha256` goes with `pypi`"), "{e}");
    let e = err("[[repo]]\npypi = \"isodate==0.6.1\"\nindex_url = \"ftp://x\"\n");
    assert!(
        e.starts_with("P:3:13: `index_url` is a simple index's URL"),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pipeline.toml");
    let hex = "AB".repeat(32);
    let text = format!(
        "[[repo]]\npypi = \"Iso.Date==0.6.1\"\nsha256 = \"{hex}\"\nindex_url = \"http://127.0.0.1:9/simple\"\n"
    );
    let c = parse(&text, &file).unwrap();
    assert_eq!(c.repos[0].name, "Iso.Date");
    let RepoSource::Pypi(r) = &c.repos[0].source else {
        panic!("{:?}", c.repos[0].source)
    };
    assert_eq!(r.normalized(), "iso-date");
    assert_eq!(r.version, "0.6.1");
    assert_eq!(r.index_url, "http://127.0.0.1:9/simple/");
    let pinned = r.sha256.as_ref().unwrap();
    assert_eq!(pinned.hex, "ab".repeat(32));
    assert_eq!(pinned.at, format!("{}:3:10", file.display()));
    let text = "[[repo]]\npypi = \"isodate==0.6.1\"\n[[repo]]\npypi = \"ISODATE==0.6.1\"\nname = \"again\"\n";
    let e = parse(text, &file).unwrap_err().to_string();
    assert!(e.contains(":4:8: this repo is repo `isodate` again"), "{e}");
}

#[test]
fn exclude_newer_is_an_instant_in_utc() {
    let e = err("[[repo]]\npath = \"repo\"\n[env]\nexclude_newer = \"2025-13-01\"\n");
    assert!(
        e.starts_with("P:4:17: `2025-13-01` is not an instant in UTC"),
        "{e}"
    );
}

#[test]
fn unknown_key_names_line_and_column() {
    let e = err("[project]\nnmae = \"x\"\n");
    assert!(e.starts_with("P:2:1: unknown field `nmae`"), "{e}");
}

#[test]
fn wrong_type_and_bad_value() {
    let e = err("[[repo]]\npath = \"repo\"\n[context]\nmax_tokens = \"many\"\n");
    assert!(e.starts_with("P:4:14:"), "{e}");
    let e = err("[[repo]]\npath = \"repo\"\n[context]\nstrategy = \"sliceed\"\n");
    assert!(e.starts_with("P:4:12:") && e.contains("sliceed"), "{e}");
}

#[test]
fn a_base_image_that_is_no_image_name_or_without_docker_is_named() {
    let e = err(
        "[[repo]]\npath = \"repo\"\n[sandbox]\nbackend = \"docker\"\nbase_image = \"Debian:Bookworm\"\n",
    );
    assert!(
        e.starts_with("P:5:1: `base_image = \"Debian:Bookworm\"` is not an image name")
            && e.contains("`Debian` may hold lowercase letters"),
        "{e}"
    );
    let e = err("[[repo]]\npath = \"repo\"\n[sandbox]\nbase_image = \"debian:bookworm\"\n");
    assert!(
        e.starts_with("P:4:1: `base_image` is for `backend = \"docker\"`"),
        "{e}"
    );
}

#[test]
fn a_registry_that_is_no_host_and_prefix_or_without_docker_is_named() {
    let e =
        err("[[repo]]\npath = \"repo\"\n[sandbox]\nbackend = \"docker\"\nregistry = \"images\"\n");
    assert!(
        e.starts_with("P:5:1: `registry = \"images\"` is not a registry and prefix")
            && e.contains("HOST[:PORT]/PREFIX"),
        "{e}"
    );
    let e = err(
        "[[repo]]\npath = \"repo\"\n[sandbox]\nbackend = \"docker\"\nregistry = \"team/r2e\"\n",
    );
    assert!(e.contains("`team` is no registry's host"), "{e}");
    let e = err(
        "[[repo]]\npath = \"repo\"\n[sandbox]\nbackend = \"docker\"\nregistry = \"127.0.0.1:5000/R2E\"\n",
    );
    assert!(e.contains("`R2E` may hold lowercase letters"), "{e}");
    let e = err("[[repo]]\npath = \"repo\"\n[sandbox]\nregistry = \"127.0.0.1:5000/r2e\"\n");
    assert!(
        e.starts_with("P:4:1: `registry` is for `backend = \"docker\"`"),
        "{e}"
    );
}

#[test]
fn missing_repo_path_is_named() {
    let e = err("[[repo]]\npath = \"nope\"\n");
    assert!(
        e.starts_with("P:2:8: repo path") && e.contains("nope` does not exist"),
        "{e}"
    );
}

#[test]
fn variants_merge_over_the_pipeline_and_bad_ones_are_located() {
    let dir = tempfile::tempdir().unwrap();
    fs_err::create_dir(dir.path().join("repo")).unwrap();
    let text = "[[repo]]\npath = \"repo\"\n[context]\nmax_tokens = 500\n[select]\nmin_branch_coverage = 0.5\n\
                    [[variant]]\nname = \"naive\"\ncontext.strategy = \"naive\"\n\
                    [[variant]]\nname = \"strict\"\n[variant.select]\nmin_branch_coverage = 0.9\n";
    let c = parse(text, &dir.path().join("pipeline.toml")).unwrap();
    let names: Vec<&str> = c.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["naive", "strict"]);
    let naive = c.variant("naive").unwrap();
    // Only the named key changes; the pipeline's other keys of the table stay.
    assert_eq!(naive.context.strategy, Strategy::Naive);
    assert_eq!(naive.context.max_tokens, 500);
    assert_eq!(naive.select.min_branch_coverage, 0.5);
    assert_eq!(naive.output, dir.path().join("out/variants/naive"));
    let strict = c.variant("strict").unwrap();
    assert_eq!(strict.select.min_branch_coverage, 0.9);
    assert_eq!(strict.context.strategy, Strategy::Sliced);
    assert!(
        c.variant("other")
            .unwrap_err()
            .to_string()
            .contains("`naive`, `strict`")
    );

    // A bad value in a variant names the variant, its line and column.
    let e =
        err("[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"v\"\ncontext.strategy = \"wide\"\n");
    assert!(
        e.starts_with("P:5:1: variant `v`: `context`:") && e.contains("wide"),
        "{e}"
    );
    let e = err(
        "[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"v\"\nselect.min_branch_coverage = 2.0\n",
    );
    assert!(
        e.starts_with("P:5:8: variant `v`: `min_branch_coverage`"),
        "{e}"
    );
    // Under a `[variant.section]` header, and by section when two sections share a key.
    let e = err(
        "[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"v\"\n[variant.select]\nmin_branch_coverage = 2.0\n",
    );
    assert!(
        e.starts_with("P:6:1: variant `v`: `min_branch_coverage`"),
        "{e}"
    );
    let e = err(
        "[[repo]]\npath = \"repo\"\n[providers.p]\nbase_url = \"http://h\"\n[[variant]]\nname = \"v\"\n\
                     generate.generator = \"llm\"\ngenerate.provider = \"p\"\ngenerate.model = \"m\"\n\
                     refine.enabled = true\nrefine.provider = \"nowhere\"\nrefine.model = \"m\"\n",
    );
    assert!(
        e.starts_with("P:11:8: variant `v`: unknown provider `nowhere`"),
        "{e}"
    );
    // Settings a variant cannot change, duplicate and unsafe names.
    let e =
        err("[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"v\"\nenv.python = \"python3.12\"\n");
    assert!(e.starts_with("P:5:1: unknown field `env`"), "{e}");
    let e =
        err("[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"v\"\n[[variant]]\nname = \"v\"\n");
    assert!(e.starts_with("P:6:8: two variants are named `v`"), "{e}");
    let e = err("[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"../x\"\n");
    assert!(e.starts_with("P:4:8: a variant name"), "{e}");
    // A variant that asks a model checks its provider as the pipeline would.
    let e = err(
        "[[repo]]\npath = \"repo\"\n[[variant]]\nname = \"m\"\ngenerate.generator = \"hybrid\"\n",
    );
    assert!(
        e.starts_with("P:5:10: variant `m`: `generator = \"hybrid\"` needs `provider"),
        "{e}"
    );
    let e = err(
        "[[repo]]\npath = \"repo\"\n[refine]\nenabled = true\nprovider = \"nowhere\"\nmodel = \"m\"\n",
    );
    assert!(e.starts_with("P:5:1: unknown provider `nowhere`"), "{e}");
}

#[test]
fn defaults() {
    let dir = tempfile::tempdir().unwrap();
    fs_err::create_dir(dir.path().join("repo")).unwrap();
    let c = parse(
        "[[repo]]\npath = \"repo\"\n",
        &dir.path().join("pipeline.toml"),
    )
    .unwrap();
    assert_eq!(c.output, dir.path().join("out"));
    assert_eq!(c.cache, dir.path().join("cache"));
    assert_eq!(c.repos[0].name, "repo");
    assert_eq!(c.context, ContextConfig::default());
    assert!(c.extract.connectivity);
}
