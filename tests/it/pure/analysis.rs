//! Data-driven tests of extraction, filters, import resolution, slices and context strategies,
//! each on a small multi-file package written by the test.

use crate::common;
use common::{Project, slice_functions, slice_globals};

const PKG: &str = r#"
//- pkg/__init__.py
from .core import helper
//- pkg/core.py
LIMIT = 10
TABLE = {"a": LIMIT}

def helper(x):
    """Add the limit."""
    y = x + LIMIT
    return y

def unused(x):
    """Nobody calls this."""
    z = x * 2
    return z

class Base:
    """A base."""
    scale = 3

    def __init__(self, n):
        self.n = n

    def size(self):
        """The size."""
        s = self.n * 2
        return s

    def scaled(self, k):
        """Scaled by the class attribute."""
        s = self.scale * k
        return s

class Child(Base):
    def grow(self, k):
        """Grow by k."""
        m = self.size() + k
        return helper(m)

    def parent_size(self, k):
        """Ask the parent."""
        v = super().size()
        return v + k
//- pkg/star.py
from pkg.core import *
//- pkg/sub/__init__.py
//- pkg/sub/deep.py
def deep(v):
    """Deep."""
    w = v - 1
    return w
//- pkg/app.py
import pkg.core
import pkg.core as pc
import pkg.sub.deep
from . import core
from .core import helper as h
from pkg.star import Base
from pkg import helper as top_helper
from .sub import deep as deep_mod
import numpy as np

def via_import(x):
    """Dotted module attribute."""
    y = pkg.core.helper(x)
    return y + 1

def via_alias(x):
    """Aliased module."""
    y = pc.helper(x)
    return y * 2

def via_from_dot(x):
    """from . import module."""
    y = core.helper(x)
    return -y

def via_from_as(x):
    """from .m import f as g."""
    y = h(x)
    return y // 2

def via_star(n):
    """Class re-exported through a star import."""
    b = Base(n)
    return b.size()

def via_package(x):
    """Name re-exported by a package __init__."""
    y = top_helper(x)
    return y

def via_submodule(v):
    """Submodule chains."""
    a = pkg.sub.deep.deep(v)
    b = deep_mod.deep(a)
    return a + b

def via_local_import(x):
    """Import inside the body."""
    from pkg.core import TABLE
    t = TABLE["a"]
    return t + x

def via_global(x):
    """Reads a global of another module."""
    y = core.TABLE["a"]
    return x + y

def third_party(x):
    """Only numpy."""
    a = np.array(x)
    return a.sum()
"#;

#[test]
fn every_import_form_resolves() {
    let p = Project::new(PKG, "");
    p.build();
    let f = p.functions();
    let helper = "r:pkg/core.py:helper".to_string();
    for id in [
        "via_import",
        "via_alias",
        "via_from_dot",
        "via_from_as",
        "via_package",
    ] {
        assert_eq!(
            slice_functions(&f, &format!("r:pkg/app.py:{id}")),
            vec![helper.clone()],
            "{id}"
        );
        assert_eq!(
            slice_globals(&f, &format!("r:pkg/app.py:{id}")),
            vec!["pkg.core.LIMIT"],
            "{id}"
        );
    }
    // A class through `from pkg.star import Base` (a star import), with its constructor and the
    // method called on the instance... which is not resolved (no types): only the class and __init__.
    assert_eq!(
        slice_functions(&f, "r:pkg/app.py:via_star"),
        vec!["r:pkg/core.py:Base", "r:pkg/core.py:Base.__init__"]
    );
    assert_eq!(
        slice_functions(&f, "r:pkg/app.py:via_submodule"),
        vec!["r:pkg/sub/deep.py:deep"]
    );
    assert_eq!(
        slice_globals(&f, "r:pkg/app.py:via_local_import"),
        vec!["pkg.core.LIMIT", "pkg.core.TABLE"]
    );
    assert_eq!(
        slice_globals(&f, "r:pkg/app.py:via_global"),
        vec!["pkg.core.LIMIT", "pkg.core.TABLE"]
    );
    // Third-party names are recorded, not guessed; with nothing else the function is unconnected.
    assert_eq!(f["r:pkg/app.py:third_party"]["excluded_by"], "connectivity");
}

#[test]
fn self_super_and_inherited_methods() {
    let p = Project::new(PKG, "");
    p.build();
    let f = p.functions();
    // self.size() is inherited from Base; helper() is a module function; the method's class and
    // its base come in through the class.
    let grow = slice_functions(&f, "r:pkg/core.py:Child.grow");
    for want in [
        "r:pkg/core.py:Base.size",
        "r:pkg/core.py:helper",
        "r:pkg/core.py:Child",
        "r:pkg/core.py:Base",
    ] {
        assert!(grow.contains(&want.to_string()), "{want} not in {grow:?}");
    }
    assert!(!grow.contains(&"r:pkg/core.py:unused".to_string()));
    assert!(
        slice_functions(&f, "r:pkg/core.py:Child.parent_size")
            .contains(&"r:pkg/core.py:Base.size".to_string())
    );
    // A class attribute read through self counts as reading the class.
    assert_eq!(
        slice_functions(&f, "r:pkg/core.py:Base.scaled"),
        vec!["r:pkg/core.py:Base", "r:pkg/core.py:Base.__init__"]
    );
    assert_eq!(f["r:pkg/core.py:unused"]["excluded_by"], "connectivity");
    let rec = &f["r:pkg/app.py:third_party"];
    assert_eq!(rec["kind"], "function");
    assert_eq!(f["r:pkg/core.py:Child.grow"]["kind"], "method");
}

#[test]
fn unresolved_names_are_recorded() {
    let p = Project::new(PKG, "[extract]\nconnectivity = false\n");
    p.build();
    let f = p.functions();
    let unresolved = &f["r:pkg/app.py:third_party"]["slice"]["unresolved"];
    assert_eq!(unresolved, &serde_json::json!(["np.array"]));
}

const FILTERED: &str = r#"
//- m.py
K = 2

def no_doc(x):
    y = x + K
    return y

def __dunder__(x):
    """Doc."""
    y = x + K
    return y

def test_thing(x):
    """Doc."""
    y = x + K
    return y

@some_decorator
def decorated(x):
    """Doc."""
    y = x + K
    return y

def no_params():
    """Doc."""
    y = K + 1
    return y

def no_return(x):
    """Doc."""
    y = x + K
    print(y)

def one_statement(x):
    """Doc."""
    return x + K

def literal_returns(x):
    """Doc."""
    if x > K:
        return 1
    return 2

def keyword_body(x):
    """Doc."""
    y = requests.get(x, K)
    return y

def keyword_doc(x):
    """Upload the file to the cloud."""
    y = x + K
    return y

def unconnected(x):
    """Doc."""
    y = x + 1
    return y

def too_long(x):
    """Doc."""
    y = x + K
    y += 1
    y += 1
    y += 1
    y += 1
    y += 1
    return y

class C:
    @staticmethod
    def fine(x):
        """Doc."""
        y = x + K
        return y

    def method_no_params(self):
        """Doc."""
        y = K + 1
        return y

    def __private(self, x):
        """Doc: class-private, bound as `_C__private`."""
        y = x + K
        return y

def good(x):
    """Doc.

    Only lines of code count towards `max_lines`: not this docstring,

    blank lines or comments.
    """
    # A comment.

    y = x + K
    return no_doc(y)
"#;

#[test]
fn every_filter_excludes_by_name() {
    let p = Project::new(FILTERED, "[extract]\nmax_lines = 7\n");
    let summary = p.build();
    let f = p.functions();
    let want = [
        ("no_doc", Some("no_docstring")),
        ("__dunder__", Some("dunder")),
        ("test_thing", Some("name_prefix")),
        ("decorated", Some("decorator")),
        ("no_params", Some("no_params")),
        ("no_return", Some("no_return")),
        ("one_statement", Some("one_statement")),
        ("too_long", Some("too_long")),
        ("literal_returns", Some("literal_returns")),
        ("keyword_body", Some("keywords")),
        ("keyword_doc", Some("keywords")),
        ("unconnected", Some("connectivity")),
        ("C.fine", None),
        ("C.method_no_params", Some("no_params")),
        ("C.__private", Some("dunder")),
        ("good", None),
    ];
    for (name, filter) in want {
        let row = &f[&format!("r:m.py:{name}")];
        assert_eq!(row["excluded_by"].as_str(), filter, "{name}");
    }
    assert_eq!(summary.counts.candidates, Some(2));
    assert!(
        summary
            .excluded_by
            .0
            .contains(&(r2e_core::records::Filter::Keywords, 2))
    );
}

#[test]
fn filters_can_be_switched_off() {
    let p = Project::new(
        FILTERED,
        "[extract]\nno_docstring = false\none_statement = false\nconnectivity = false\ntoo_long = false\n",
    );
    p.build();
    let f = p.functions();
    assert!(f["r:m.py:no_doc"]["excluded_by"].is_null());
    assert!(f["r:m.py:one_statement"]["excluded_by"].is_null());
    assert!(f["r:m.py:unconnected"]["excluded_by"].is_null());
    assert_eq!(f["r:m.py:decorated"]["excluded_by"], "decorator");
}

const CONTEXT: &str = r#"
//- a.py
from b import far_helper

def near(x):
    """Near."""
    y = far_helper(x)
    return y

def target(x):
    """Target."""
    y = near(x)
    return y + 1
//- b.py
from c import farthest

def far_helper(x):
    """Far."""
    y = farthest(x)
    return y * 3
//- c.py
def farthest(x):
    """Farthest, and long."""
    values = [x, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6, x + 7, x + 8, x + 9, x + 10]
    total = sum(values) + sum(v * v for v in values) + max(values) - min(values)
    return total
//- d.py
def unrelated(x):
    """Not imported."""
    y = x
    return y
"#;

fn tokens_of(p: &Project, id: &str) -> (u64, bool) {
    let f = p.functions();
    let s = &f[id]["slice"];
    (
        s["tokens"].as_u64().unwrap(),
        s["truncated"].as_bool().unwrap(),
    )
}

#[test]
fn context_strategies_and_cutting() {
    let count = |text: &str| bpe_openai::cl100k_base().count(text) as u64;
    let target_src = "def target(x):\n    \"\"\"Target.\"\"\"\n    y = near(x)\n    return y + 1\n";

    let p = Project::new(CONTEXT, "[context]\nstrategy = \"naive\"\n");
    p.build();
    assert_eq!(
        tokens_of(&p, "r:a.py:target"),
        (count(&format!("# file: a.py\n{target_src}")), false)
    );

    // Sliced: every definition of the slice fits in a large budget.
    let p = Project::new(
        CONTEXT,
        "[context]\nstrategy = \"sliced\"\nmax_tokens = 6000\n",
    );
    p.build();
    let (all, truncated) = tokens_of(&p, "r:a.py:target");
    assert!(!truncated);
    assert_eq!(
        slice_functions(&p.functions(), "r:a.py:target"),
        vec!["r:a.py:near", "r:b.py:far_helper", "r:c.py:farthest"]
    );
    // The rendered context's real token count equals the sum the planner used.
    let cfg = r2e_core::config::load(&p.pipeline()).unwrap();
    let explained = r2e_pipeline::inspect::explain(&cfg, "r:a.py:target").unwrap();
    let text = explained.context.as_ref().unwrap().text.as_str();
    assert_eq!(count(text), all, "{text}");
    assert!(
        text.find("def farthest").unwrap() < text.find("def far_helper").unwrap(),
        "farthest file first: {text}"
    );
    assert!(
        text.ends_with(target_src),
        "the function's own file comes last: {text}"
    );

    // A budget that cannot hold the farthest definition drops it first.
    let p2 = Project::new(
        CONTEXT,
        &format!(
            "[context]\nstrategy = \"sliced\"\nmax_tokens = {}\n",
            all - 5
        ),
    );
    p2.build();
    let (cut, truncated) = tokens_of(&p2, "r:a.py:target");
    assert!(truncated && cut < all - 5);
    let cfg = r2e_core::config::load(&p2.pipeline()).unwrap();
    let text = r2e_pipeline::inspect::explain(&cfg, "r:a.py:target")
        .unwrap()
        .context
        .unwrap()
        .text;
    assert!(
        !text.contains("def farthest") && text.contains("def far_helper"),
        "{text}"
    );

    // Full: its file plus the files it imports, never an unrelated one.
    let p3 = Project::new(CONTEXT, "[context]\nstrategy = \"full\"\n");
    p3.build();
    let cfg = r2e_core::config::load(&p3.pipeline()).unwrap();
    let v = r2e_pipeline::inspect::explain(&cfg, "r:a.py:target").unwrap();
    let context = v.context.as_ref().unwrap();
    let text = context.text.as_str();
    assert!(
        text.contains("# file: b.py")
            && text.contains("# file: a.py")
            && !text.contains("unrelated"),
        "{text}"
    );
    assert_eq!(count(text), u64::from(context.tokens));
}

#[test]
fn duplicate_qualnames_get_numbered_ids() {
    let p = Project::new(
        r#"
//- m.py
K = 1

class P:
    def __init__(self):
        self._v = K

    @property
    def v(self):
        """Get."""
        return self._v

    @v.setter
    def v(self, value):
        """Set."""
        self._v = value + K

def f(x):
    """One."""
    y = x + K
    return y

if K:
    def f(x):
        """Two."""
        y = x - K
        return y
"#,
        "",
    );
    p.build();
    let f = p.functions();
    assert!(
        f.contains_key("r:m.py:P.v") && f.contains_key("r:m.py:P.v#2"),
        "{:?}",
        f.keys()
    );
    assert_eq!(
        f["r:m.py:P.v#2"]["start_line"], 13,
        "the def line, not the decorator's"
    );
    // The conditional `f` is outside R2E's scope, so it is not listed.
    assert!(f.contains_key("r:m.py:f") && !f.contains_key("r:m.py:f#2"));
}

#[test]
fn modern_syntax_and_bad_files_are_data() {
    let p = Project::new(
        r#"
//- modern.py
type Alias = list[int]

def matcher(x: Alias, y):
    """Uses 3.12 syntax."""
    y = y + 1
    match x:
        case [first, *rest]:
            return f"{first!r:>{y}} {'nested' + f'{rest}'}"
        case _:
            return helper(x)

def helper[T](v: T) -> T:
    """Generic."""
    w = v
    return w
//- broken.py
def f(:
    pass
"#,
        "",
    );
    std::fs::write(
        p.path().join("repo/latin.py"),
        b"# -*- coding: latin-1 -*-\ndef caf\xe9(x):\n    \"\"\"Caf\xe9.\"\"\"\n    return x\n",
    )
    .unwrap();
    std::fs::write(p.path().join("repo/binary.py"), b"\x00\xff\xfe\x00garbage").unwrap();
    let summary = p.build();
    let f = p.functions();
    assert!(
        f["r:modern.py:matcher"]["excluded_by"].is_null(),
        "{}",
        f["r:modern.py:matcher"]
    );
    assert_eq!(f["r:latin.py:café"]["docstring"], "Café.");
    let failures = std::fs::read_to_string(p.path().join("out/failures.jsonl")).unwrap();
    assert!(
        failures.contains("broken.py") && failures.contains("syntax error at 1:7"),
        "{failures}"
    );
    assert!(
        failures.contains("binary.py") && failures.contains("not valid UTF-8"),
        "{failures}"
    );
    assert_eq!(summary.stages.parse.failed, 2);
}

#[test]
fn call_sites_with_literal_arguments_are_found_likeliest_first() {
    let p = Project::new(
        r#"
//- m.py
def area(w, h):
    """Area."""
    z = w * h
    return z

class Box:
    def area(self, scale):
        """Scaled."""
        z = scale * 2
        return z

X = area(2, 3)
Y = area(w=4, h=some_name)
Z = area(some_name, other_name)
//- tests/test_m.py
import datetime
from m import area, Box

def test_area():
    assert area(5, -6) == -30
    assert area(*pair) == 1
    assert Box().area(7) == 14
    assert area(2, 3) == 6
    assert area(datetime.date(2020, 1, 31), [1, 2]) is None
"#,
        "",
    );
    let cfg = r2e_core::config::load(&p.pipeline()).unwrap();
    let session = r2e_pipeline::session::Session::open(&cfg).unwrap();
    let db = &session.db;
    let repo = session.repos[0];
    let file = *repo
        .files(db)
        .iter()
        .find(|f| f.path(db) == "m.py")
        .unwrap();
    let show = |sites: Vec<r2e_python::summary::CallSite>| -> Vec<String> {
        sites
            .into_iter()
            .map(|s| {
                let kw = s.kwargs.iter().map(|(k, v)| format!("{k}={v}"));
                format!(
                    "{}{}({})",
                    if s.attribute { "." } else { "" },
                    s.callee,
                    s.args
                        .iter()
                        .cloned()
                        .chain(kw)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
            .collect()
    };
    // The function: its own module's calls first, then the others; repeats and calls without a
    // literal argument (or with *args) are left out; method-style calls come last.
    assert_eq!(
        show(r2e_pipeline::db::call_sites_for(db, file, "area", false)),
        [
            "area(2, 3)",
            "area(w=4, h=some_name)",
            "area(5, -6)",
            "area(datetime.date(2020, 1, 31), [1, 2])",
            ".area(7)",
        ]
    );
    // The method: `x.area(...)` first.
    assert_eq!(
        show(r2e_pipeline::db::call_sites_for(db, file, "Box.area", true))[0],
        ".area(7)"
    );
}

const SCOPED: &str = r#"
//- setup.py
import setuptools

def read_version(path):
    """The version in a file."""
    text = open(path).read()
    return text.strip()
//- versioneer.py
def render(pieces):
    """Render a version."""
    out = pieces["tag"]
    return out
//- docs/conf.py
import sphinx_theme_x

def setup(app):
    """Sphinx hook."""
    result = app.add(1)
    return result
//- tests/conftest.py
import pytest_plugin_x
from pkg.core import scale

def make(n):
    """A fixture helper that calls scale with a literal."""
    value = scale(n, 3)
    return value
//- pkg/__init__.py
from pkg import _version
//- pkg/_version.py
import vendored_dep

PREFIX = "v"

def get_version(x):
    """The version."""
    v = PREFIX + str(x)
    return v
//- pkg/core.py
import numpy_like
from pkg.helpers import twice

def scale(n, k):
    """Scale n by k."""
    m = twice(n) * k
    return m
//- pkg/helpers.py
def twice(n):
    """Twice n."""
    t = n + n
    return t
//- pkg/vendor/thing.py
from pkg.helpers import twice

def thing(n):
    """Vendored."""
    u = twice(n) - 1
    return u
"#;

#[test]
fn a_repositorys_scope_decides_its_candidates_and_its_inferred_imports() {
    // The defaults: tests, docs, setup.py and vendored build helpers give no candidates.
    let p = Project::new(SCOPED, "");
    let summary = p.build();
    let f = p.functions();
    let scope = |id: &str| f[id]["excluded_by"].as_str().map(str::to_owned);
    for id in [
        "r:setup.py:read_version",
        "r:versioneer.py:render",
        "r:docs/conf.py:setup",
        "r:tests/conftest.py:make",
        "r:pkg/_version.py:get_version",
    ] {
        assert_eq!(scope(id).as_deref(), Some("scope"), "{id}");
    }
    assert_eq!(scope("r:pkg/core.py:scale"), None);
    assert_eq!(scope("r:pkg/vendor/thing.py:thing"), None);
    assert!(
        summary
            .excluded_by
            .0
            .contains(&(r2e_core::records::Filter::Scope, 5))
    );
    // Out-of-scope code is still context: the slice of `scale` reaches its helpers.
    assert!(
        slice_functions(&f, "r:pkg/core.py:scale").contains(&"r:pkg/helpers.py:twice".to_owned())
    );
    // Imports are inferred from the scope and what it imports (`_version.py` runs when `pkg`
    // is imported), not from tests, docs or setup.py.
    let cfg = r2e_core::config::load(&p.pipeline()).unwrap();
    let s = r2e_pipeline::session::Session::open(&cfg).unwrap();
    let imports = r2e_pipeline::db::external_imports(&s.db, s.repos[0])
        .required
        .clone();
    assert_eq!(
        imports,
        vec!["numpy_like".to_owned(), "vendored_dep".to_owned()]
    );

    // `include`, `exclude` and `default_exclude`.
    let p = Project::new(
        SCOPED,
        "include = [\"pkg/**\", \"setup.py\"]\nexclude = [\"pkg/vendor/**\"]\ndefault_exclude = false\n",
    );
    p.build();
    let f = p.functions();
    let scope = |id: &str| f[id]["excluded_by"].as_str().map(str::to_owned);
    // (setup.py's function is in scope, and then out by another filter.)
    assert_eq!(
        scope("r:setup.py:read_version").as_deref(),
        Some("connectivity")
    );
    assert_eq!(scope("r:pkg/_version.py:get_version"), None);
    assert_eq!(
        scope("r:pkg/vendor/thing.py:thing").as_deref(),
        Some("scope")
    );
    assert_eq!(scope("r:tests/conftest.py:make").as_deref(), Some("scope"));
    assert_eq!(scope("r:docs/conf.py:setup").as_deref(), Some("scope"));
}

#[test]
fn a_bad_scope_glob_names_its_place() {
    let p = Project::new(SCOPED, "exclude = [\"pkg/[\"]\n");
    let err = r2e_core::config::load(&p.pipeline())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("pipeline.toml:8:12") && err.contains("is not a glob"),
        "{err}"
    );
}

#[test]
fn explain_shows_the_full_slice_the_compact_form_gives() {
    // `functions.jsonl` names a candidate's node; its slice is the closure of that node in
    // `slices/r.jsonl`. Read back, it is what `r2e explain` shows, item by item, distances,
    // order and unresolved names included.
    let p = Project::new(PKG, "[extract]\nconnectivity = false\n");
    p.build();
    let out = p.path().join("out");
    let graph = r2e_core::records::SliceGraph::read(&out, "r").unwrap();
    let cfg = r2e_core::config::load(&p.pipeline()).unwrap();
    let text = std::fs::read_to_string(out.join("functions.jsonl")).unwrap();
    let mut candidates = 0;
    let mut deepest = 0;
    for line in text.lines() {
        let f: r2e_core::records::FunctionRecord = serde_json::from_str(line).unwrap();
        let Some(slice) = f.slice else { continue };
        candidates += 1;
        let full = graph.slice(slice.node);
        let from_graph: Vec<(String, u32)> = full
            .items
            .iter()
            .map(|&(n, d)| (graph.nodes[n as usize].name.to_string(), d))
            .collect();
        let explained = r2e_pipeline::inspect::explain(&cfg, &f.id).unwrap();
        let explained_slice = explained.slice.unwrap();
        let shown: Vec<(String, u32)> = explained_slice
            .items
            .iter()
            .map(|i| (i.item.clone(), i.distance))
            .collect();
        assert_eq!(from_graph, shown, "{}", f.id);
        assert_eq!(full.unresolved, explained_slice.unresolved, "{}", f.id);
        assert_eq!(slice.size, full.functions.len() + full.globals.len());
        deepest = deepest.max(shown.iter().map(|s| s.1).max().unwrap_or(0));
    }
    assert!(candidates >= 10, "{candidates}");
    assert!(deepest >= 2, "some slice is transitive");
    // The graph writes each node once, however many slices hold it.
    let names: std::collections::BTreeSet<&str> =
        graph.nodes.iter().map(|n| n.name.as_ref()).collect();
    assert_eq!(names.len(), graph.nodes.len());
}
