//! Verdict fixtures (issue 11): tiny repositories modeled on real cases, built with every
//! default (offline: environments install the pinned coverage.py from the tests' wheelhouse),
//! then judged by the real binary's `r2e check`: the original passes, and mutants that a
//! benchmark must catch fail. Also: a candidate cannot reach the reference.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use assert_cmd::Command;
use common::Project;
use serde_json::Value;

const OFFLINE: &str = "[env]\ninstaller = \"pip\"\n";

/// `r2e` offline, in `dir`.
fn r2e(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("r2e").unwrap();
    c.envs(common::offline_env())
        .current_dir(dir)
        .timeout(std::time::Duration::from_secs(900));
    c
}

use common::jsonl;

/// Builds the project with every default: its harnesses and its dataset, by id.
fn build(p: &Project) -> (BTreeMap<String, Value>, BTreeMap<String, Value>) {
    common::offline_build(p.path());
    built(p)
}

/// The harnesses and the dataset of the project's last build, by id.
fn built(p: &Project) -> (BTreeMap<String, Value>, BTreeMap<String, Value>) {
    let by_id = |name: &str| -> BTreeMap<String, Value> {
        jsonl(&p.path().join("out").join(name))
            .into_iter()
            .map(|v| (v["id"].as_str().unwrap().to_owned(), v))
            .collect()
    };
    (by_id("harnesses.jsonl"), by_id("dataset.jsonl"))
}

/// Asserts that `id` has a valid harness and is an instance; its dataset line.
fn instance<'a>(
    harnesses: &BTreeMap<String, Value>,
    dataset: &'a BTreeMap<String, Value>,
    id: &str,
) -> &'a Value {
    let h = harnesses
        .get(id)
        .unwrap_or_else(|| panic!("no harness for {id}: {harnesses:#?}"));
    assert_eq!(h["valid"], true, "{id} has a valid harness: {h}");
    dataset
        .get(id)
        .unwrap_or_else(|| panic!("{id} is an instance: {h}"))
}

/// How many of an instance's tests return normally in every call they record.
fn returning_tests(row: &Value) -> usize {
    row["expected"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            t["records"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["outcome"].get("return").is_some())
        })
        .count()
}

/// `r2e check ID --candidate FILE --json` on `text`: the exit code and the verdict.
fn check(p: &Project, id: &str, label: &str, text: &str) -> (i32, Value) {
    let file = p.path().join(format!("candidate-{label}.py"));
    std::fs::write(&file, text).unwrap();
    let out = r2e(p.path())
        .args(["check", id, "--json", "--candidate"])
        .arg(&file)
        .output()
        .unwrap();
    let verdict: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check {label}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), verdict)
}

fn assert_passes(p: &Project, id: &str, label: &str, text: &str) -> Value {
    let (code, verdict) = check(p, id, label, text);
    assert_eq!(code, 0, "{label} passes check: {verdict:#}");
    assert_eq!(verdict["passed"], true, "{label}: {verdict:#}");
    verdict
}

fn assert_fails(p: &Project, id: &str, label: &str, text: &str) {
    let (code, verdict) = check(p, id, label, text);
    assert_eq!(code, 1, "{label} fails check: {verdict:#}");
    assert_eq!(verdict["passed"], false, "{label}: {verdict:#}");
}

/// The text of `def name` in a fixture file (from its `def` line to the next line indented
/// no deeper than it), dedented: the original as a candidate.
fn def_text(p: &Project, file: &str, name: &str) -> String {
    let src = std::fs::read_to_string(p.path().join("repo").join(file)).unwrap();
    let lines: Vec<&str> = src.lines().collect();
    let def = lines
        .iter()
        .position(|l| l.trim_start().starts_with(&format!("def {name}(")))
        .unwrap_or_else(|| panic!("def {name} in {file}"));
    // From its first decorator to the end of its body.
    let start = (0..def)
        .rev()
        .take_while(|&i| lines[i].trim_start().starts_with('@'))
        .last()
        .unwrap_or(def);
    let indent = lines[def].len() - lines[def].trim_start().len();
    let end = (def + 1..lines.len())
        .find(|&i| {
            let l = lines[i];
            !l.trim().is_empty() && l.len() - l.trim_start().len() <= indent
        })
        .unwrap_or(lines.len());
    let text: String = lines[start..end].iter().map(|l| format!("{l}\n")).collect();
    r2e_python::dedent(&text, &r2e_python::strings_in(&text))
}

/// `text` with `from` replaced by `to` once, which must be there: a mutant.
fn mutant(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "`{from}` once in {text}");
    text.replacen(from, to, 1)
}

const SLUGIFY: &str = r#"
//- slugkit/__init__.py
//- slugkit/translit.py
_TABLE = {
    "à": "a", "á": "a", "â": "a", "ä": "a", "å": "a", "ã": "a",
    "ç": "c", "è": "e", "é": "e", "ê": "e", "ë": "e",
    "ì": "i", "í": "i", "î": "i", "ï": "i", "ñ": "n",
    "ò": "o", "ó": "o", "ô": "o", "ö": "o", "ø": "o",
    "ù": "u", "ú": "u", "û": "u", "ü": "u", "ý": "y", "ÿ": "y",
    "À": "A", "Á": "A", "Â": "A", "Ä": "A", "Å": "A", "Ç": "C",
    "È": "E", "É": "E", "Ê": "E", "Ë": "E", "Ñ": "N",
    "Ò": "O", "Ó": "O", "Ô": "O", "Ö": "O", "Ø": "O",
    "Ù": "U", "Ú": "U", "Û": "U", "Ü": "U",
    "ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE",
}


def unidecode(text):
    """Transliterate text to ASCII: accented letters become their plain letters, other
    non-ASCII characters are dropped."""
    out = []
    for ch in text:
        if ord(ch) < 128:
            out.append(ch)
        else:
            out.append(_TABLE.get(ch, ""))
    return "".join(out)

//- slugkit/slug.py
import re

from .translit import unidecode

_DISALLOWED = re.compile(r"[^a-zA-Z0-9]+")


def slugify(text, lowercase=True, separator="-", max_length=0):
    """Make a URL slug of text.

    Accented characters are transliterated to ASCII, the text is lower-cased when
    `lowercase` is true, every run of characters that are not letters or digits becomes one
    `separator`, and separators are stripped from both ends. With `max_length` > 0 the slug is
    cut to at most that many characters (and stripped again).
    """
    text = unidecode(text)
    if lowercase:
        text = text.lower()
    text = _DISALLOWED.sub(separator, text).strip(separator)
    if max_length > 0:
        text = text[:max_length].strip(separator)
    return text
"#;

/// python-slugify's `slugify`, with `unidecode` standing in as a helper of the repository and
/// no doctest: the explorer finds inputs that tell the mutants apart on its own (its common
/// strings hold upper case and accented letters).
#[test]
fn slugify_mutants_fail_and_the_original_passes() {
    let p = Project::new(SLUGIFY, OFFLINE);
    let (harnesses, dataset) = build(&p);
    let id = "r:slugkit/slug.py:slugify";
    instance(&harnesses, &dataset, id);
    let original = def_text(&p, "slugkit/slug.py", "slugify");
    assert_passes(&p, id, "original", &original);
    assert_fails(
        &p,
        id,
        "inverted-lowercase",
        &mutant(&original, "if lowercase:", "if not lowercase:"),
    );
    assert_fails(
        &p,
        id,
        "no-transliteration",
        &mutant(&original, "    text = unidecode(text)\n", ""),
    );
}

const SORT_TOGETHER: &str = r#"
//- more.py
from operator import itemgetter


def zip_equal(*iterables):
    """Zip the iterables together, raising ValueError if they are not all the same length."""
    iterators = [iter(it) for it in iterables]
    rows = []
    while True:
        row = []
        stopped = 0
        for it in iterators:
            try:
                row.append(next(it))
            except StopIteration:
                stopped += 1
        if stopped:
            if stopped != len(iterators):
                raise ValueError("Iterables have different lengths")
            return rows
        rows.append(tuple(row))


def sort_together(iterables, key_list=(0,), key=None, reverse=False, strict=False):
    """Sort the iterables together, by the items of the ones at the offsets in key_list.

    The result is a list of tuples, one per input iterable, sorted as the key iterables are:
    by their items, or by `key` applied to those items (with one argument per key iterable)
    when `key` is given, in descending order when `reverse` is true. With `strict`, iterables
    of different lengths raise ValueError; otherwise the longer ones are cut.
    """
    if key is None:
        key_argument = itemgetter(*key_list)
    else:
        key_list = list(key_list)
        if len(key_list) == 1:
            key_offset = key_list[0]
            key_argument = lambda zipped_items: key(zipped_items[key_offset])
        else:
            get_key_items = itemgetter(*key_list)
            key_argument = lambda zipped_items: key(*get_key_items(zipped_items))
    zipper = zip_equal if strict else zip
    return list(zipper(*sorted(zipper(*iterables), key=key_argument, reverse=reverse)))
"#;

/// more-itertools' `sort_together`: a mutant that ignores `key`, and one that ignores
/// `reverse`, fail.
#[test]
fn sort_together_mutants_that_ignore_key_or_reverse_fail() {
    let p = Project::new(SORT_TOGETHER, OFFLINE);
    let (harnesses, dataset) = build(&p);
    let id = "r:more.py:sort_together";
    instance(&harnesses, &dataset, id);
    let original = def_text(&p, "more.py", "sort_together");
    assert_passes(&p, id, "original", &original);
    assert_fails(
        &p,
        id,
        "ignores-key",
        &mutant(&original, "    if key is None:\n", "    if True:\n"),
    );
    assert_fails(
        &p,
        id,
        "ignores-reverse",
        &mutant(&original, ", reverse=reverse)", ")"),
    );
}

const TABLE: &str = r#"
//- tables.py
import copy
from itertools import islice

_MISSING = object()


class Table:
    """A table of rows under a list of headers, with a dict of metadata."""

    def __init__(self, data=None, headers=_MISSING, metadata=None):
        if headers is _MISSING:
            headers = []
            if data:
                headers, data = list(data[0]), islice(data, 1, None)
        self.headers = list(headers or [])
        self.metadata = dict(metadata or {})
        self._data = []
        self._width = 0
        self.extend(data)

    def extend(self, data):
        """Append rows, padding every row with None to the widest."""
        if not data:
            return
        for row in data:
            row = list(row)
            self._width = max(self._width, len(row))
            self._data.append(row)
        for row in self._data:
            row.extend([None] * (self._width - len(row)))

    @classmethod
    def from_data(cls, data, headers=_MISSING, metadata=None):
        """Make a table from data.

        `data` is another Table (copied, with new headers when `headers` is given and its
        metadata updated by `metadata`), a list of dicts (the headers are the first dict's
        keys unless given; each row holds the dict's values under the headers), or a list of
        rows (the first row is the headers unless given).
        """
        if isinstance(data, Table):
            table = copy.deepcopy(data)
            if headers is not _MISSING:
                table.headers = list(headers)
            if metadata:
                table.metadata.update(metadata)
            return table
        if data and isinstance(data[0], dict):
            if headers is _MISSING:
                headers = list(data[0])
            rows = [[d.get(h) for h in headers] for d in data]
            return cls(rows, headers=headers, metadata=metadata)
        return cls(data, headers=headers, metadata=metadata)
"#;

/// boltons' `Table.from_data`: copying a table (`copy.deepcopy`) adds `__slotnames__` to the
/// class during the reference's run; that is no state of the result's, so the harness is
/// valid (not `nondeterministic`), the original passes twice with the same verdict, and a
/// mutant that drops an attribute assignment fails.
#[test]
fn table_from_data_is_stable_across_the_copy_state_leak() {
    let p = Project::new(TABLE, OFFLINE);
    let (harnesses, dataset) = build(&p);
    let id = "r:tables.py:Table.from_data";
    assert_ne!(
        harnesses.get(id).map(|h| h["failure_class"].clone()),
        Some(Value::from("nondeterministic")),
        "{harnesses:#?}"
    );
    instance(&harnesses, &dataset, id);
    let original = def_text(&p, "tables.py", "from_data");
    let first = assert_passes(&p, id, "original", &original);
    let second = assert_passes(&p, id, "original-again", &original);
    common::verdict::assert_same_verdict(&first, &second, "the same verdict twice");
    assert_fails(
        &p,
        id,
        "drops-headers",
        &mutant(
            &original,
            "table.headers = list(headers)",
            "pass  # headers dropped",
        ),
    );
}

const LEVENSHTEIN: &str = r#"
//- distance.py
def substitution_cost(a, b):
    """The cost of replacing character a by character b: 0 when they are equal, else 1."""
    return 0 if a == b else 1


def levenshtein(a, b):
    """The edit distance between the strings a and b: the fewest single-character
    insertions, deletions and substitutions that turn a into b."""
    if len(a) < len(b):
        return levenshtein(b, a)
    if not b:
        return len(a)
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            insert = current[j - 1] + 1
            delete = previous[j] + 1
            substitute = previous[j - 1] + substitution_cost(ca, cb)
            current.append(min(insert, delete, substitute))
        previous = current
    return previous[-1]
"#;

/// A Levenshtein distance: the harness is about distances, not about the interpreter's errors
/// (at most one of its tests raises `TypeError` or `AttributeError` on the reference), and an
/// off-by-one mutant fails.
#[test]
fn levenshtein_tests_distances_and_catches_an_off_by_one() {
    let p = Project::new(LEVENSHTEIN, OFFLINE);
    let (harnesses, dataset) = build(&p);
    let id = "r:distance.py:levenshtein";
    let row = instance(&harnesses, &dataset, id);
    let interpreter_errors: Vec<&Value> = row["expected"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            t["records"].as_array().unwrap().iter().any(|r| {
                matches!(
                    r["outcome"]["raise"]["type"].as_str(),
                    Some("TypeError" | "AttributeError")
                )
            })
        })
        .collect();
    assert!(
        interpreter_errors.len() <= 1,
        "at most one test is an interpreter error: {interpreter_errors:#?}\n{}",
        row["harness"].as_str().unwrap()
    );
    let original = def_text(&p, "distance.py", "levenshtein");
    assert_passes(&p, id, "original", &original);
    assert_fails(
        &p,
        id,
        "off-by-one",
        &mutant(&original, "current = [i]", "current = [i - 1]"),
    );
}

const PLACES: &str = r#"
//- places.py
import sys


def gap(n):
    """n plus one, plus how many lines lie between two points of this function."""
    first = sys._getframe().f_lineno
    n = n + 1
    last = sys._getframe().f_lineno
    return last - first + n


def banner(name):
    """A banner for name: two rules, then name, then name in upper case."""
    top = """==
    ==""" + \
        name
    return top + "\n" + name.upper()
"#;

/// A function whose outcome depends on where its own lines are (as pyparsing's `_trim_arity`
/// does) has no valid harness: a correct rewrite moves lines, so validation checks the original
/// with its lines moved apart. Moving them keeps string values and continuations as they are:
/// a function with a multi-line string and a `\` continuation stays valid.
#[test]
fn a_function_that_reads_its_own_line_numbers_has_no_valid_harness() {
    // Neither function calls another definition of the repository: the connectivity filter
    // would leave both out. `unstable = "invalid"`: a test whose runs disagree (here, the
    // original with its lines moved apart) fails the harness instead of being dropped.
    let p = Project::new(
        PLACES,
        "[env]\ninstaller = \"pip\"\n\n[extract]\nconnectivity = false\n\n\
         [validate]\nunstable = \"invalid\"\n",
    );
    let (harnesses, dataset) = build(&p);
    let gap = &harnesses["r:places.py:gap"];
    assert_eq!(gap["valid"], false, "{gap:#}");
    assert_eq!(gap["failure_class"], "nondeterministic", "{gap:#}");
    assert!(
        gap["failure_message"]
            .as_str()
            .unwrap()
            .contains("lines moved apart"),
        "{gap:#}"
    );
    assert!(!dataset.contains_key("r:places.py:gap"));
    let id = "r:places.py:banner";
    instance(&harnesses, &dataset, id);
    let original = def_text(&p, "places.py", "banner");
    assert_passes(&p, id, "original", &original);
    assert_fails(
        &p,
        id,
        "upper-to-lower",
        &mutant(&original, "name.upper()", "name.lower()"),
    );
}

/// The same function under the default `[validate] unstable = "drop"`: every test that saw
/// where its lines are disagrees with the original checked with its lines moved apart and is
/// dropped, which leaves it no harness (too few tests, or none that returns) and no instance;
/// it is not failed as `nondeterministic` (the `invalid` policy's verdict). A twin that does
/// not read its line numbers keeps its tests and is an instance, and so is `banner`.
#[test]
fn under_the_default_policy_tests_that_read_line_numbers_are_dropped() {
    let p = Project::new(
        PLACES,
        "[env]\ninstaller = \"pip\"\n\n[extract]\nconnectivity = false\n",
    );
    p.write(
        "steady.py",
        r#"
        def gap(n):
            """n plus one, plus two."""
            first = 1
            n = n + 1
            last = 3
            return last - first + n
        "#,
    );
    let (harnesses, dataset) = build(&p);
    let gap = &harnesses["r:places.py:gap"];
    assert_eq!(gap["valid"], false, "{gap:#}");
    assert!(
        ["too_few_tests", "no_normal_return"].contains(&gap["failure_class"].as_str().unwrap()),
        "its tests of a returned value were dropped: {gap:#}"
    );
    assert!(!dataset.contains_key("r:places.py:gap"), "{gap:#}");
    let twin = instance(&harnesses, &dataset, "r:steady.py:gap");
    assert!(twin["tests"].as_u64() >= Some(3), "{twin}");
    assert!(returning_tests(twin) > 0, "{twin}");
    assert!(twin["stability"].get("dropped").is_none(), "{twin}");
    let banner = instance(&harnesses, &dataset, "r:places.py:banner");
    assert!(banner["stability"].get("dropped").is_none(), "{banner}");
}

/// A module in Latin-1 (PEP 263): validation checks its original as a candidate, and `check`
/// writes candidates spliced into it, in UTF-8.
#[test]
fn a_latin1_module_validates_and_checks_its_candidates() {
    let p = Project::new(
        "//- accents.py\n",
        "[env]\ninstaller = \"pip\"\n\n[extract]\nconnectivity = false\n",
    );
    std::fs::write(
        p.path().join("repo/accents.py"),
        b"# -*- coding: latin-1 -*-\n\n\ndef accent(word):\n    \"\"\"The word with an acute e after it; caf\xe9 for no word.\"\"\"\n    if not word:\n        return 'caf\xe9'\n    return word + '\xe9'\n",
    )
    .unwrap();
    let (harnesses, dataset) = build(&p);
    let id = "r:accents.py:accent";
    instance(&harnesses, &dataset, id);
    let original = "def accent(word):\n    \"\"\"The word with an acute e after it; caf\u{e9} for no word.\"\"\"\n    if not word:\n        return 'caf\u{e9}'\n    return word + '\u{e9}'\n";
    assert_passes(&p, id, "original", original);
    assert_fails(
        &p,
        id,
        "no-accent",
        &mutant(original, "word + '\u{e9}'", "word + 'e'"),
    );
}

const PEEK: &str = r#"
//- peek.py
def weight(x):
    """The weight of a number: its square plus one."""
    return x * x + 1


def heavier(a, b):
    """The weight of the heavier of a and b, doubled."""
    if weight(a) > weight(b):
        return 2 * weight(a)
    return 2 * weight(b)
"#;

/// Candidates that try to reach the reference's answer; each returns None when it finds no
/// other `heavier` than itself. Every one of them would pass if the reference were reachable.
const REACHING: &[(&str, &str)] = &[
    (
        "sys-modules",
        r##"
import sys

def heavier(a, b):
    # CANDIDATE
    for m in list(sys.modules.values()):
        for name in ("heavier", "reference_heavier"):
            f = getattr(m, name, None)
            if callable(f) and f is not heavier and getattr(f, "__code__", None) is not heavier.__code__:
                try:
                    answer = f(a, b)
                except Exception:
                    continue
                if answer is not None:
                    return answer
    return None
"##,
    ),
    (
        "gc",
        r##"
import gc
import types

def heavier(a, b):
    # CANDIDATE
    for o in gc.get_objects():
        if (
            isinstance(o, types.FunctionType)
            and o.__name__ in ("heavier", "reference_heavier")
            and o.__code__ is not heavier.__code__
        ):
            try:
                answer = o(a, b)
            except Exception:
                continue
            if answer is not None:
                return answer
    return None
"##,
    ),
    (
        "inspect",
        r##"
import inspect
import sys

def heavier(a, b):
    # CANDIDATE
    for info in inspect.stack():
        for scope in (info.frame.f_globals, info.frame.f_locals):
            for name in ("heavier", "reference_heavier"):
                f = scope.get(name)
                if callable(f) and getattr(f, "__code__", None) is not heavier.__code__:
                    try:
                        answer = f(a, b)
                    except Exception:
                        continue
                    if answer is not None:
                        return answer
    for m in list(sys.modules.values()):
        try:
            source = inspect.getsource(m)
        except Exception:
            continue
        if "def heavier(" in source and "# CANDIDATE" not in source:
            scope = {"__name__": "found"}
            try:
                exec(source, scope)
                return scope["heavier"](a, b)
            except Exception:
                continue
    return None
"##,
    ),
    (
        "file",
        r##"
import os

def heavier(a, b):
    # CANDIDATE
    paths = [__file__, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peek.py")]
    for root in (os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        for folder, _, files in os.walk(root):
            paths += [os.path.join(folder, f) for f in files if f.endswith(".py")]
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        except Exception:
            continue
        if "def heavier(" in source and "# CANDIDATE" not in source:
            scope = {"__name__": "found"}
            try:
                exec(source, scope)
                return scope["heavier"](a, b)
            except Exception:
                continue
    return None
"##,
    ),
    (
        "proc",
        r##"
import ctypes
import os
import sys

def heavier(a, b):
    # CANDIDATE
    # The module's file where the import path says it is, straight, after undoing the mounts
    # over it, and through every process's root (the worker's, the sandbox's first process).
    files = [os.path.join(entry or ".", "peek.py") for entry in sys.path]
    libc = ctypes.CDLL(None, use_errno=True)
    for path in files:
        libc.umount2(path.encode(), 2)
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    paths = files + [f"/proc/{pid}/root{os.path.abspath(f)}" for pid in pids for f in files]
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
        except Exception:
            continue
        if "def heavier(" in source and "# CANDIDATE" not in source:
            scope = {"__name__": "found"}
            try:
                exec(source, scope)
                return scope["heavier"](a, b)
            except Exception:
                continue
    return None
"##,
    ),
];

/// A candidate never shares a process with the reference, nor sees its file: candidates that
/// walk `sys.modules`, the garbage collector or `inspect`'s frames and sources, or read the
/// original file (straight, after unmounting what covers it, or through another process's
/// `/proc/<pid>/root`), find only themselves, return None, and fail.
#[test]
fn a_candidate_cannot_reach_the_reference() {
    let p = Project::new(PEEK, OFFLINE);
    let (harnesses, dataset) = build(&p);
    let id = "r:peek.py:heavier";
    instance(&harnesses, &dataset, id);
    assert_passes(&p, id, "original", &def_text(&p, "peek.py", "heavier"));
    for (label, text) in REACHING {
        assert_fails(&p, id, label, text);
    }
}

const MYGRAPH: &str = r#"
//- mygraph/__init__.py
"""A tiny graph package: graphs are built only by its factories."""

from mygraph.core import Graph, cycle_graph, path_graph
from mygraph.algorithms import Walker, degree_sum, neighbors_of

__all__ = ["Graph", "Walker", "cycle_graph", "degree_sum", "neighbors_of", "path_graph"]

//- mygraph/core.py
"""The graph class and its factories."""

_TOKEN = object()


class Graph:
    """An undirected graph. Build one with `path_graph` or `cycle_graph`."""

    def __init__(self, token, name=""):
        if token is not _TOKEN:
            raise TypeError("build a Graph with a factory such as path_graph(n)")
        self.name = name
        self.adj = {}

    def add_node(self, n):
        self.adj.setdefault(n, set())

    def add_edge(self, u, v):
        self.add_node(u)
        self.add_node(v)
        self.adj[u].add(v)
        self.adj[v].add(u)

    @property
    def nodes(self):
        return sorted(self.adj)

    def neighbors(self, n):
        return sorted(self.adj[n])


def path_graph(n):
    """Returns the path graph on `n` nodes."""
    g = Graph(_TOKEN, name=f"path{n}")
    for i in range(n):
        g.add_node(i)
    for i in range(n - 1):
        g.add_edge(i, i + 1)
    return g


def cycle_graph(n):
    """Returns the cycle graph on `n` nodes."""
    g = path_graph(n)
    if n > 2:
        g.add_edge(n - 1, 0)
    return g

//- mygraph/algorithms.py
"""Algorithms on graphs (the module does not name Graph or its factories)."""


def _neighbors(G, n):
    return G.neighbors(n)


def degree_sum(G):
    """Returns the sum of the degrees of the nodes of `G`."""
    total = 0
    for n in G.nodes:
        total += len(_neighbors(G, n))
    return total


def neighbors_of(G, n):
    """Returns the neighbors of node `n` of `G`: a tuple when there are several."""
    if n not in G.nodes:
        raise KeyError(f"no node {n}")
    out = _neighbors(G, n)
    if len(out) > 1:
        return tuple(out)
    return out


class Walker:
    def __init__(self, G):
        self.G = G
        self.order = list(G.nodes)

    def walk(self, start, steps):
        """Walks `steps` steps from `start`, alternating the last and the first neighbor."""
        if start not in self.G.adj:
            raise ValueError("start is not a node")
        path = [start]
        for _ in range(steps):
            nxt = _neighbors(self.G, path[-1])
            if not nxt:
                break
            path.append(nxt[-1] if len(path) % 2 else nxt[0])
        return path
"#;

/// Functions that take the package's own class (issue 36), which its constructor cannot make
/// (it needs a private token): the explorer builds graphs through the factories the package
/// exports (`reference_package.cycle_graph(4)`), for parameters used as `G.nodes` and for the
/// constructor argument of a method's class. The harnesses are valid instances, tests return
/// normally on those graphs, and a wrong candidate fails while the original passes.
#[test]
fn structured_arguments_are_built_through_the_packages_factories() {
    let p = Project::new(MYGRAPH, OFFLINE);
    let (harnesses, dataset) = build(&p);
    for id in [
        "r:mygraph/algorithms.py:degree_sum",
        "r:mygraph/algorithms.py:neighbors_of",
        "r:mygraph/algorithms.py:Walker.walk",
    ] {
        let row = instance(&harnesses, &dataset, id);
        let harness = row["harness"].as_str().unwrap();
        assert!(
            harness.contains("import mygraph as reference_package")
                && (harness.contains("reference_package.path_graph(")
                    || harness.contains("reference_package.cycle_graph(")),
            "{id} builds graphs through the factories: {harness}"
        );
        assert!(
            returning_tests(row) >= 1,
            "{id} has tests that return normally: {row:#}"
        );
    }
    let id = "r:mygraph/algorithms.py:degree_sum";
    let original = def_text(&p, "mygraph/algorithms.py", "degree_sum");
    assert_passes(&p, id, "original", &original);
    assert_fails(
        &p,
        id,
        "counts-nodes",
        &mutant(&original, "len(_neighbors(G, n))", "1"),
    );
    let id = "r:mygraph/algorithms.py:neighbors_of";
    let original = def_text(&p, "mygraph/algorithms.py", "neighbors_of");
    assert_passes(&p, id, "original", &original);
    assert_fails(
        &p,
        id,
        "always-a-list",
        &mutant(&original, "return tuple(out)", "return out"),
    );
}

const TOKENS: &str = r#"
//- tok/__init__.py
"""Assignments read by a tokenizer that only the package's own parser sets up."""

from tok.core import RULES, Tokenizer

//- tok/core.py
import re

RULES = {
    "NAME": re.compile(r"[a-z]+"),
    "EQ": re.compile(r"="),
    "WS": re.compile(r"[ ]*"),
}


class Tokenizer:
    def __init__(self, source, *, rules):
        self.source = source
        self.rules = rules
        self.position = 0

    def read(self, name):
        match = self.rules[name].match(self.source, self.position)
        if match is None:
            raise SyntaxError(f"expected {name} at {self.position}")
        self.position = match.end()
        return match.group()

//- tok/parse.py
def _spaced(tokenizer, name):
    tokenizer.read("WS")
    found = tokenizer.read(name)
    tokenizer.read("WS")
    return found


def parse_assignment(tokenizer):
    """Reads `name = name` from `tokenizer`: both names, or one when they are the same."""
    left = tokenizer.read("NAME")
    _spaced(tokenizer, "EQ")
    right = tokenizer.read("NAME")
    if left == right:
        return (left,)
    return (left, right)


def where(folder):
    """The folder's last part."""
    folder = folder.rstrip("/")
    return _spaced_name(folder.rsplit("/", 1)[-1])


def _spaced_name(name):
    return name.strip()

//- tests/test_parse.py
import os
import unittest

from tok.core import RULES, Tokenizer
from tok.parse import parse_assignment, where


class TestParse(unittest.TestCase):
    def test_pair(self):
        self.assertEqual(parse_assignment(Tokenizer("a = b", rules=RULES)), ("a", "b"))

    def test_same(self):
        self.assertEqual(parse_assignment(Tokenizer("x=x", rules=RULES)), ("x",))

    def test_where(self):
        self.assertEqual(where(os.path.dirname(os.path.abspath(__file__))), "tests")

//- tok/files.py
def stem_of(path):
    """The file's name without its suffix; a hidden file's name as it is."""
    name = path.name
    if _hidden(name):
        return name
    return path.stem


def _hidden(name):
    return name.startswith(".")

//- tests/test_files.py
import tempfile
import unittest
from pathlib import Path, PurePosixPath

from tok.files import stem_of


class TestFiles(unittest.TestCase):
    def test_here(self):
        self.assertEqual(stem_of(Path(__file__).parent / "data.txt"), "data")

    def test_temp(self):
        self.assertTrue(stem_of(Path(tempfile.gettempdir())))

    def test_plain(self):
        self.assertEqual(stem_of(PurePosixPath("docs/readme.md")), "readme")
        self.assertEqual(stem_of(PurePosixPath("conf/.hidden")), ".hidden")
"#;

/// A wheel of `name` 1.0 holding one module `name.py` with `body`, made by the host's python3
/// in `dir` (no build backend, no index).
fn tiny_wheel(dir: &Path, name: &str, body: &str) {
    const SCRIPT: &str = r#"
import base64, hashlib, sys, zipfile
out, name, body = sys.argv[1:]
info = f"{name}-1.0.dist-info"
files = {
    f"{name}.py": body,
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: r2e-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def digest(text):
    raw = hashlib.sha256(text.encode()).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
record = "".join(f"{p},{digest(t)},{len(t.encode())}\n" for p, t in files.items())
files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
with zipfile.ZipFile(f"{out}/{name}-1.0-py3-none-any.whl", "w") as z:
    for p, t in files.items():
        z.writestr(p, t)
"#;
    std::fs::create_dir_all(dir).unwrap();
    let out = std::process::Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(dir)
        .args([name, body])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test-only dependency (issue 52): the package's tests import `tokhelp`, which only its
/// `requirements-test.txt` declares. The capture's environment installs it (with where it was
/// declared, in `envs.jsonl`), so the tests run and their tokenizers reach a valid harness;
/// the functions' own environment stays without it. Where it cannot be installed (not in the
/// wheels the build may use), it is a failed package of the capture's environment, the tests
/// do not import, and no harness of `parse_assignment` is valid.
#[test]
fn a_test_only_dependency_is_installed_for_the_capture_alone() {
    let files = TOKENS
        .replace(
            "//- tests/test_parse.py\nimport os\nimport unittest\n",
            "//- tests/test_parse.py\nimport os\nimport unittest\n\nimport tokhelp\n",
        )
        .replace(
            "//- tok/files.py",
            "//- requirements-test.txt\ntokhelp\n\n//- tok/files.py",
        );
    assert!(files.contains("import tokhelp") && files.contains("requirements-test.txt"));
    let build_with = |wheels: Option<&Path>| {
        let p = Project::new(&files, OFFLINE);
        common::offline_build_with(p.path(), wheels.as_slice());
        let env = jsonl(&p.path().join("out/envs.jsonl")).remove(0);
        let (harnesses, dataset) = built(&p);
        (p, harnesses, dataset, env)
    };
    let wheels = tempfile::tempdir().unwrap();
    tiny_wheel(wheels.path(), "tokhelp", "SAMPLE = 'a = b'\n");

    let (p, harnesses, dataset, env) = build_with(Some(wheels.path()));
    let id = "r:tok/parse.py:parse_assignment";
    let row = instance(&harnesses, &dataset, id);
    assert!(
        row["harness"]
            .as_str()
            .unwrap()
            .contains("r2e_equiv.loads("),
        "the tokenizers are the captured ones: {row:#}"
    );
    assert!(
        returning_tests(row) >= 2,
        "both captured calls return: {row:#}"
    );
    let capture = &env["capture"];
    assert!(
        capture["requirements"].as_array().unwrap().contains(
            &serde_json::json!({"requirement": "tokhelp", "source": "requirements-test.txt"})
        ),
        "the requirement is recorded with its file: {env:#}"
    );
    assert!(
        !capture["failed_packages"].to_string().contains("tokhelp"),
        "tokhelp installed: {env:#}"
    );
    assert_ne!(capture["lock_hash"], env["lock_hash"], "{env:#}");
    assert!(
        !env["lock"].to_string().contains("tokhelp"),
        "the functions' environment is the project's own: {env:#}"
    );
    let original = def_text(&p, "tok/parse.py", "parse_assignment");
    assert_passes(&p, id, "original", &original);

    let (_, harnesses, _, env) = build_with(None);
    assert!(
        env["capture"]["failed_packages"]
            .to_string()
            .contains("tokhelp"),
        "not installable here: {env:#}"
    );
    assert_ne!(
        harnesses[id]["valid"], true,
        "without its test dependency the tests do not import: {}",
        harnesses[id]
    );
}

/// A module whose class is instrumented at import from the module's source, as runtime type
/// checkers do (typeguard's `@typechecked` on a class), passes as its own candidate with its
/// lines moved apart (issue 52: in a candidate's process the original's file is hidden, an
/// empty file, so the decorator found no source and the module did not import: `unrunnable`).
/// The candidate's source is what `inspect` reads for the module there, so the decorator finds
/// each method at its own line, `perimeter` included, which the spread lines of `area` move.
#[test]
fn a_module_instrumented_from_its_source_at_import_passes_as_its_own_candidate() {
    const FILES: &str = r#"
//- deco/__init__.py
//- deco/registry.py
import ast
import inspect
import sys


def instrumented(cls):
    """Finds each method of the class in its module's source, at its own line, as runtime
    type checkers do when they instrument a class."""
    tree = ast.parse(inspect.getsource(sys.modules[cls.__module__]))
    lines = {
        node.name: node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
    }
    for name, func in vars(cls).items():
        if inspect.isfunction(func) and lines.get(name) != func.__code__.co_firstlineno:
            raise ImportError(f"{name} is not at line {func.__code__.co_firstlineno}")
    return cls

//- deco/shapes.py
from deco.registry import instrumented


def _sides(width, height):
    if width < 0 or height < 0:
        raise ValueError("negative side")


@instrumented
class Rect:
    def __init__(self, width, height):
        self.width = width
        self.height = height

    def area(self, scale):
        """The area at `scale`; a negative side is an error."""
        _sides(self.width, self.height)
        if self.width == 0:
            return 0
        return self.width * self.height * scale * scale

    def perimeter(self, scale):
        """The perimeter at `scale`; a negative side is an error."""
        _sides(self.width, self.height)
        if self.width == 0 or self.height == 0:
            return 2 * max(self.width, self.height) * scale
        return 2 * (self.width + self.height) * scale
"#;
    let p = Project::new(FILES, OFFLINE);
    let (harnesses, dataset) = build(&p);
    for name in ["area", "perimeter"] {
        let id = format!("r:deco/shapes.py:Rect.{name}");
        instance(&harnesses, &dataset, &id);
        let original = def_text(&p, "deco/shapes.py", name);
        assert_passes(&p, &id, "original", &original);
        assert_fails(
            &p,
            &id,
            "no-check",
            &mutant(&original, "    _sides(self.width, self.height)\n", ""),
        );
    }
}

/// A source release's package reads its own version at import from the `.egg-info` folder at
/// the root (issue 52: that folder was hidden from a candidate's process, where the version
/// was then None and the module did not import, so the original failed as its own candidate and
/// the function was `unrunnable`). The original now passes as its own candidate.
#[test]
fn a_module_that_reads_its_own_metadata_at_import_passes_as_its_own_candidate() {
    const FILES: &str = r#"
//- vers.egg-info/PKG-INFO
Metadata-Version: 2.1
Name: vers
Version: 1.4.2

//- vers.egg-info/top_level.txt
vers

//- vers/__init__.py
import importlib.metadata

__version__ = importlib.metadata.version(__name__)
VERSION = tuple(int(p) for p in __version__.split("."))


def _known(part):
    if part not in (0, 1, 2):
        raise ValueError(f"no part {part}")


def bump(version, part):
    """The version with `part` (0, 1 or 2) raised by one and the parts after it zeroed."""
    _known(part)
    parts = list(version)
    parts[part] += 1
    for i in range(part + 1, len(parts)):
        parts[i] = 0
    return tuple(parts)
"#;
    let p = Project::new(FILES, OFFLINE);
    let (harnesses, dataset) = build(&p);
    let id = "r:vers/__init__.py:bump";
    instance(&harnesses, &dataset, id);
    let original = def_text(&p, "vers/__init__.py", "bump");
    assert_passes(&p, id, "original", &original);
    assert_fails(
        &p,
        id,
        "no-zeroing",
        &mutant(&original, "parts[i] = 0", "parts[i] = parts[i]"),
    );
}

/// Every text in the JSON lines of `path`, and in each pickle a harness loads
/// (`r2e_equiv.loads(b"...")`) every string it holds and every run of strings that starts a
/// path (a `PurePath` pickles as its parts), each joined by `/`: read by the host's `python3`.
fn texts_with_pickles(path: &Path) -> String {
    const SCRIPT: &str = r#"
import ast, json, pickletools, re, sys
LOADS = re.compile(r"loads\((b'(?:[^'\\]|\\.)*'|b\"(?:[^\"\\]|\\.)*\")\)")
def strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from strings(x)
for line in open(sys.argv[1], encoding="utf-8"):
    for text in strings(json.loads(line)):
        print(text)
        for m in LOADS.finditer(text):
            run = None
            for op, arg, _ in pickletools.genops(ast.literal_eval(m.group(1))):
                if isinstance(arg, bytes):
                    arg = arg.decode("utf-8", "replace")
                if isinstance(arg, str):
                    print(arg)
                    run = arg if run is None and arg.startswith("/") else (None if run is None else run + "/" + arg)
                    if run is not None:
                        print(re.sub("/+", "/", run))
                elif op.name not in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT", "FRAME", "MARK"):
                    run = None
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", SCRIPT])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Arguments that only the project's own tests build (issue 36): `parse_assignment` takes a
/// `Tokenizer` with the package's rules, which nothing in the package constructs. The build
/// runs `tests/` once, records the arguments the tests pass (`r2e_capture.py`), and the
/// harness loads the tokenizers as they were captured: valid, with tests that return normally,
/// passing the original and failing a wrong candidate. Without the capture
/// (`capture_tests = false`) no input returns normally. A captured argument naming this
/// machine's folders (`where(os.path.dirname(__file__))`, a pickled `Path` of the tests' or the
/// temporary folder) is dropped, never written.
#[test]
fn arguments_the_projects_tests_pass_are_captured() {
    let p = Project::new(TOKENS, OFFLINE);
    let (harnesses, dataset) = build(&p);
    let id = "r:tok/parse.py:parse_assignment";
    let row = instance(&harnesses, &dataset, id);
    let harness = row["harness"].as_str().unwrap();
    assert!(
        harness.contains("r2e_equiv.loads("),
        "the tokenizers are the captured ones: {harness}"
    );
    assert!(
        returning_tests(row) >= 2,
        "both captured calls return: {row:#}"
    );
    let original = def_text(&p, "tok/parse.py", "parse_assignment");
    assert_passes(&p, id, "original", &original);
    assert_fails(
        &p,
        id,
        "always-two",
        &mutant(&original, "return (left,)", "return (left, right)"),
    );
    let root = p.path().to_string_lossy().into_owned();
    for (id, h) in &harnesses {
        let text = h["harness"].as_str().unwrap_or_default();
        assert!(
            !text.contains(&root),
            "{id}'s harness names no folder of this machine: {text}"
        );
    }
    // Path arguments (issue 50): `stem_of` is called with a path of the tests' folder, the
    // temporary folder and two relative ones. The relative ones are captured (pickles of
    // `PurePosixPath`); no text of the dataset, nor any string of a pickle in it, holds this
    // machine's project, temporary, cache or home folders.
    let stem = instance(&harnesses, &dataset, "r:tok/files.py:stem_of");
    assert!(
        stem["harness"]
            .as_str()
            .unwrap()
            .contains("r2e_equiv.loads("),
        "the relative paths are the captured ones: {stem}"
    );
    let texts = texts_with_pickles(&p.path().join("out/dataset.jsonl"));
    let mut machine: Vec<String> = vec![root.clone(), "/tmp/".into(), "/root/".into()];
    for dir in [
        Some(p.path().canonicalize().unwrap()),
        Some(std::env::temp_dir()),
        std::env::var_os("HOME").map(Into::into),
    ]
    .into_iter()
    .flatten()
    {
        let dir = dir.to_string_lossy().trim_end_matches('/').to_owned();
        if dir.len() > 1 {
            machine.push(dir.clone());
            machine.push(format!("{dir}/.cache"));
        }
    }
    for line in texts.lines() {
        for m in &machine {
            assert!(
                !line.contains(m.as_str()),
                "the dataset holds `{m}` of this machine: {line}"
            );
        }
    }

    let off = Project::new(
        TOKENS,
        &format!("{OFFLINE}\n[generate]\ncapture_tests = false\n"),
    );
    let (harnesses, _) = build(&off);
    let h = &harnesses[id];
    assert_ne!(
        h["valid"], true,
        "without the capture no tokenizer is built: {h}"
    );
}

/// Instances that no constructor call the explorer can write will build, taken from the
/// project's own uses (issue 52, item 4), one module per source:
/// - `ledger`: its constructor reads rows from an object only the tests define; the capture
///   records the instance the tests called `balance` on (`receiver`);
/// - `color`: its constructor checks a checksum of the state it is given (`seal`); the class's
///   own alternate constructor (`Color.gray(4)`) builds one;
/// - `markup` (sealed too): the docstring's session builds the instance with a function no
///   name, annotation or docstring ties to the class (`w = start(10)`, then `w.wrap(...)`);
/// - `doc` (sealed too): a public function returns it from a text (`parse`), probed with a
///   string the project passes the method (`doc.count("# ")`).
///
/// Each was `could not construct ...` (no harness) before; each is now a valid instance whose
/// harness calls the method on that receiver, passes the original and fails a mutant.
#[test]
fn receivers_come_from_the_projects_own_uses() {
    const FILES: &str = r##"
//- uses/__init__.py
//- uses/ledger.py
def _clamp(total, floor):
    return floor if total < floor else total


class Ledger:
    """Amounts read from a source of rows."""

    def __init__(self, source):
        self.entries = [int(row) for row in source.rows()]
        if not self.entries:
            raise ValueError("an empty source")

    def balance(self, floor):
        """The sum of the entries, at most 1000 and never below `floor`."""
        total = sum(self.entries)
        if total > 1000:
            total = 1000
        return _clamp(total, floor)

//- tests/test_ledger.py
import unittest

from uses.ledger import Ledger


class Rows:
    def __init__(self, rows):
        self._rows = rows

    def rows(self):
        return list(self._rows)


class TestLedger(unittest.TestCase):
    def test_balance(self):
        self.assertEqual(Ledger(Rows([1, 2, 3])).balance(0), 6)

    def test_floor(self):
        self.assertEqual(Ledger(Rows([-5, 1])).balance(0), 0)

    def test_cap(self):
        self.assertEqual(Ledger(Rows([900, 200])).balance(0), 1000)

//- uses/seal.py
import hashlib


def sealed(data):
    """A checksum of `data` that the classes below require of their state."""
    return hashlib.sha256(repr(data).encode()).hexdigest()[:12]

//- uses/color.py
from uses.seal import sealed


def _clip(value):
    return max(0, min(255, value))


class Color:
    def __init__(self, channels, seal):
        if seal != sealed(channels):
            raise ValueError("unsealed channels")
        self.channels = channels

    @classmethod
    def gray(cls, level):
        channels = (level, level, level)
        return cls(channels, sealed(channels))

    def lighten(self, amount):
        """Each channel raised by `amount`, within 0..255."""
        if amount == 0:
            return self
        channels = tuple(_clip(c + amount) for c in self.channels)
        return Color(channels, sealed(channels))

//- uses/markup.py
from uses.seal import sealed


def start(width):
    """Lines of at most `width` columns."""
    if not isinstance(width, int):
        raise TypeError("a width is a number of columns")
    return Wrapper(width, sealed(width))


def _lines(words, width):
    lines, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line] if line else lines


class Wrapper:
    def __init__(self, width, seal):
        if seal != sealed(width):
            raise ValueError("unsealed width")
        self.width = width

    def wrap(self, text):
        """The words of `text` in lines of at most the wrapper's width.

        >>> w = start(10)
        >>> w.wrap("a few short words here")
        ['a few', 'short', 'words here']
        """
        words = text.split()
        return _lines(words, self.width)

//- uses/doc.py
from uses.seal import sealed


def _split(text):
    return [line.rstrip() for line in text.splitlines()]


def parse(text):
    """The text's lines, read."""
    lines = _split(text)
    return Document(lines, sealed(lines))


def _starting(lines, word):
    return sum(1 for line in lines if line.startswith(word))


class Document:
    def __init__(self, lines, seal):
        if seal != sealed(lines):
            raise ValueError("unsealed lines")
        self.lines = lines

    def count(self, word):
        """How many lines start with `word`."""
        if not word:
            return len(self.lines)
        return _starting(self.lines, word)


def titles(doc):
    """How many title lines the document has."""
    found = doc.count("# ")
    return found
"##;
    let p = Project::new(FILES, OFFLINE);
    let (harnesses, dataset) = build(&p);
    for (file, class, method, receiver, from, to) in [
        (
            "uses/ledger.py",
            "Ledger",
            "balance",
            "receiver = r2e_equiv.loads(",
            "    return _clamp(total, floor)\n",
            "    return total\n",
        ),
        (
            "uses/color.py",
            "Color",
            "lighten",
            "receiver = reference.Color.gray(",
            "_clip(c + amount)",
            "c + amount",
        ),
        (
            "uses/markup.py",
            "Wrapper",
            "wrap",
            "receiver = reference.start(10)",
            "_lines(words, self.width)",
            "_lines(words, self.width + 1)",
        ),
        (
            "uses/doc.py",
            "Document",
            "count",
            "receiver = reference.parse(",
            "_starting(self.lines, word)",
            "_starting(self.lines, word.strip())",
        ),
    ] {
        let id = format!("r:{file}:{class}.{method}");
        let row = instance(&harnesses, &dataset, &id);
        let harness = row["harness"].as_str().unwrap();
        assert!(
            harness.contains(receiver),
            "{id}'s tests call it on `{receiver}`: {harness}"
        );
        let original = def_text(&p, file, method);
        assert_passes(&p, &id, "original", &original);
        assert_fails(&p, &id, "mutant", &mutant(&original, from, to));
    }
}
