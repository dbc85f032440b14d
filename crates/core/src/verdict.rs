//! Verdicts: the comparison of a candidate's observed calls with the reference's, outside both
//! processes. Each side's calls are recorded as structural snapshots (`src/py/r2e_snapshot.py`);
//! this module compares them under the policy of `docs/harness.md`:
//!
//! - a raised exception matches when the candidate raises exactly the reference's type (the
//!   message is wording; it is compared only with `[validate] compare_exception_messages`);
//! - a return value matches structurally: the same types, floats within a tolerance (NaN equal
//!   to NaN), plain dicts and sets without order, objects by their state, never by identity;
//! - arguments must be left in the same state, and a method's instance too;
//! - a returned function must behave the same on the harness's probe calls.
//!
//! Pure: no I/O. `render` turns a snapshot back into a readable, bounded text for feedback.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A float as a snapshot writes it: a number, or `nan`, `inf`, `-inf`. In JSON it is the bare
/// number or text; in the cache's binary encoding (which cannot guess), a tagged variant.
#[derive(Clone, Debug, PartialEq)]
pub enum Num {
    Number(f64),
    Special(String),
}

/// [`Num`] as JSON writes it.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum NumText {
    Number(f64),
    Special(String),
}

/// [`Num`] as the binary encoding writes it.
#[derive(Serialize, Deserialize)]
enum NumTagged {
    Number(f64),
    Special(String),
}

impl Serialize for Num {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self, s.is_human_readable()) {
            (Num::Number(x), true) => NumText::Number(*x).serialize(s),
            (Num::Special(t), true) => NumText::Special(t.clone()).serialize(s),
            (Num::Number(x), false) => NumTagged::Number(*x).serialize(s),
            (Num::Special(t), false) => NumTagged::Special(t.clone()).serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        Ok(if d.is_human_readable() {
            match NumText::deserialize(d)? {
                NumText::Number(x) => Num::Number(x),
                NumText::Special(t) => Num::Special(t),
            }
        } else {
            match NumTagged::deserialize(d)? {
                NumTagged::Number(x) => Num::Number(x),
                NumTagged::Special(t) => Num::Special(t),
            }
        })
    }
}

/// A sequence (list, tuple, deque, subclasses) or the drained items of an iterator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeqSnap {
    #[serde(rename = "type")]
    pub ty: String,
    pub items: Vec<Snap>,
    #[serde(default)]
    pub state: Option<BTreeMap<String, Snap>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DictSnap {
    #[serde(rename = "type")]
    pub ty: String,
    /// Whether the order of the items is part of the value (`OrderedDict`).
    pub ordered: bool,
    pub items: Vec<(Snap, Snap)>,
    pub len: u64,
    #[serde(default)]
    pub state: Option<BTreeMap<String, Snap>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetSnap {
    #[serde(rename = "type")]
    pub ty: String,
    pub items: Vec<Snap>,
    pub len: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnumSnap {
    #[serde(rename = "type")]
    pub ty: String,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjSnap {
    #[serde(rename = "type")]
    pub ty: String,
    pub state: BTreeMap<String, Snap>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExcSnap {
    #[serde(rename = "type")]
    pub ty: String,
    pub args: Vec<Snap>,
    #[serde(default)]
    pub state: BTreeMap<String, Snap>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueSnap {
    #[serde(rename = "type")]
    pub ty: String,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypedSnap {
    #[serde(rename = "type")]
    pub ty: String,
    pub value: Box<Snap>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArraySnap {
    pub dtype: String,
    pub shape: Vec<u64>,
    pub items: Vec<Snap>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameSnap {
    #[serde(rename = "type")]
    pub ty: String,
    pub index: Vec<Snap>,
    #[serde(default)]
    pub columns: Option<Vec<Snap>>,
    pub values: Vec<Snap>,
}

/// A snapshot of one Python value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Snap {
    None,
    /// Too big or too deep to be written out.
    Cut,
    Bool(bool),
    /// An int, exactly (any size), as decimal text.
    Int(String),
    Float(Num),
    Complex([Num; 2]),
    Str(String),
    /// Hex.
    Bytes(String),
    Bytearray(String),
    Enum(EnumSnap),
    Seq(SeqSnap),
    Iter(SeqSnap),
    Dict(DictSnap),
    Set(SetSnap),
    Exception(ExcSnap),
    Object(ObjSnap),
    /// A standard-library value (datetime, Decimal, Path...) by its canonical text.
    Value(ValueSnap),
    Function(String),
    Class(String),
    Module(String),
    /// A cycle: the object `n` levels up the path.
    Ref(u32),
    /// A numpy scalar: its type and value.
    Typed(TypedSnap),
    Array(ArraySnap),
    Frame(FrameSnap),
    /// A part of the reference's value that the reference itself did not reproduce in another
    /// run, in a fresh process (a cached hash of strings, an id): it matches anything
    /// ([`mask_test`]). Never written by a snapshot.
    Any,
}

/// How a call ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Return(Snap),
    Raise {
        #[serde(rename = "type")]
        ty: String,
        message: String,
    },
}

/// A call made of what a call returned: of the returned function itself (`name` none), or of
/// the returned value's method or a returned function's own attribute `name` (`r2e_equiv`'s
/// `_call_returned`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Then {
    pub outcome: Outcome,
    #[serde(default)]
    pub then: Vec<Then>,
    #[serde(default)]
    pub name: Option<String>,
}

/// A warning the module under test's own code issued during a call (`warnings.warn`): its
/// category, named as snapshots name types, and its message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Warned {
    #[serde(rename = "type")]
    pub ty: String,
    pub message: String,
}

/// One observed call: its text, its outcome, the arguments' states after it, the instance's
/// state (methods), the calls of a function it returned, and the warnings the module under
/// test issued, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub call: String,
    pub outcome: Outcome,
    #[serde(default)]
    pub args: Vec<Snap>,
    #[serde(default)]
    pub kwargs: BTreeMap<String, Snap>,
    #[serde(default)]
    pub instance: Option<Snap>,
    #[serde(default)]
    pub then: Vec<Then>,
    #[serde(default)]
    pub warnings: Vec<Warned>,
}

/// What correct code may change and still pass (`docs/harness.md`): `[validate]` in the
/// pipeline, and recorded in every instance so that a published dataset is checked as it was
/// built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    /// Compare exception messages too (by default only their types).
    pub compare_exception_messages: bool,
}

/// Relative and absolute tolerance of float comparison.
const REL_TOL: f64 = 1e-9;
const ABS_TOL: f64 = 1e-12;

fn nums_equal(a: &Num, b: &Num) -> bool {
    match (a, b) {
        (Num::Number(x), Num::Number(y)) => {
            x == y || (x - y).abs() <= (REL_TOL * x.abs().max(y.abs())).max(ABS_TOL)
        }
        (Num::Special(x), Num::Special(y)) => x == y,
        _ => false,
    }
}

/// Whether two snapshots are the same value, under the policy.
pub fn same(a: &Snap, b: &Snap) -> bool {
    differs(a, b).is_none()
}

/// Where two snapshots differ (a path like `[2].name`), or `None` when they are the same.
pub fn differs(a: &Snap, b: &Snap) -> Option<String> {
    diff(a, b, String::new())
}

fn diff(a: &Snap, b: &Snap, at: String) -> Option<String> {
    let here = || {
        Some(if at.is_empty() {
            "the value".into()
        } else {
            at.clone()
        })
    };
    match (a, b) {
        (Snap::Any, _) | (_, Snap::Any) => None,
        (Snap::Float(x), Snap::Float(y)) => (!nums_equal(x, y)).then(here).flatten(),
        (Snap::Complex([xr, xi]), Snap::Complex([yr, yi])) => (!(nums_equal(xr, yr)
            && nums_equal(xi, yi)))
        .then(here)
        .flatten(),
        (Snap::Seq(x), Snap::Seq(y)) => {
            if x.ty != y.ty || x.items.len() != y.items.len() {
                return here();
            }
            items(&x.items, &y.items, &at).or_else(|| state(&x.state, &y.state, &at))
        }
        (Snap::Iter(x), Snap::Iter(y)) => {
            if x.items.len() != y.items.len() {
                return here();
            }
            items(&x.items, &y.items, &at)
        }
        (Snap::Dict(x), Snap::Dict(y)) => dicts(x, y, &at),
        (Snap::Set(x), Snap::Set(y)) => {
            if x.ty != y.ty || x.len != y.len || !unordered(&x.items, &y.items) {
                return here();
            }
            None
        }
        (Snap::Object(x), Snap::Object(y)) => {
            if x.ty != y.ty {
                return here();
            }
            fields(&x.state, &y.state, &at)
        }
        (Snap::Exception(x), Snap::Exception(y)) => {
            if x.ty != y.ty || x.args.len() != y.args.len() {
                return here();
            }
            items(&x.args, &y.args, &format!("{at}.args"))
                .or_else(|| fields(&x.state, &y.state, &at))
        }
        (Snap::Typed(x), Snap::Typed(y)) => {
            if x.ty != y.ty {
                return here();
            }
            diff(&x.value, &y.value, at)
        }
        (Snap::Array(x), Snap::Array(y)) => {
            if x.dtype != y.dtype || x.shape != y.shape || x.items.len() != y.items.len() {
                return here();
            }
            items(&x.items, &y.items, &at)
        }
        (Snap::Frame(x), Snap::Frame(y)) => {
            let cols = match (&x.columns, &y.columns) {
                (Some(a), Some(b)) => a.len() == b.len() && items(a, b, &at).is_none(),
                (None, None) => true,
                _ => false,
            };
            if x.ty != y.ty
                || !cols
                || x.index.len() != y.index.len()
                || x.values.len() != y.values.len()
            {
                return here();
            }
            items(&x.index, &y.index, &at).or_else(|| items(&x.values, &y.values, &at))
        }
        // Scalars, names, references: exactly.
        _ => (a != b).then(here).flatten(),
    }
}

fn items(a: &[Snap], b: &[Snap], at: &str) -> Option<String> {
    a.iter()
        .zip(b)
        .enumerate()
        .find_map(|(i, (x, y))| diff(x, y, format!("{at}[{i}]")))
}

fn fields(a: &BTreeMap<String, Snap>, b: &BTreeMap<String, Snap>, at: &str) -> Option<String> {
    if a.len() != b.len() || a.keys().zip(b.keys()).any(|(x, y)| x != y) {
        let names = |m: &BTreeMap<String, Snap>| m.keys().cloned().collect::<Vec<_>>().join(", ");
        return Some(format!("{at} (attributes {} / {})", names(a), names(b)));
    }
    a.iter()
        .zip(b.values())
        .find_map(|((name, x), y)| diff(x, y, format!("{at}.{name}")))
}

fn state(
    a: &Option<BTreeMap<String, Snap>>,
    b: &Option<BTreeMap<String, Snap>>,
    at: &str,
) -> Option<String> {
    let empty = BTreeMap::new();
    fields(
        a.as_ref().unwrap_or(&empty),
        b.as_ref().unwrap_or(&empty),
        at,
    )
}

fn dicts(x: &DictSnap, y: &DictSnap, at: &str) -> Option<String> {
    let here = || {
        Some(if at.is_empty() {
            "the value".into()
        } else {
            at.to_owned()
        })
    };
    if x.ty != y.ty || x.len != y.len || x.items.len() != y.items.len() || x.ordered != y.ordered {
        return here();
    }
    if x.ordered {
        for (i, ((kx, vx), (ky, vy))) in x.items.iter().zip(&y.items).enumerate() {
            if !same(kx, ky) {
                return Some(format!("{at} (key {i})"));
            }
            if let Some(d) = diff(vx, vy, format!("{at}[{}]", render(kx, 40))) {
                return Some(d);
            }
        }
    } else {
        // Each key of one side is a key of the other (a key matching exactly first).
        let mut used = vec![false; y.items.len()];
        for (kx, vx) in &x.items {
            let found = y
                .items
                .iter()
                .enumerate()
                .find(|(i, (ky, _))| !used[*i] && ky == kx)
                .or_else(|| {
                    y.items
                        .iter()
                        .enumerate()
                        .find(|(i, (ky, _))| !used[*i] && same(kx, ky))
                });
            let Some((i, (_, vy))) = found else {
                return Some(format!("{at} (key {} missing)", render(kx, 40)));
            };
            used[i] = true;
            if let Some(d) = diff(vx, vy, format!("{at}[{}]", render(kx, 40))) {
                return Some(d);
            }
        }
    }
    state(&x.state, &y.state, at)
}

/// Two collections of elements equal as multisets.
fn unordered(a: &[Snap], b: &[Snap]) -> bool {
    let mut used = vec![false; b.len()];
    a.iter().all(|x| {
        let exact = b.iter().enumerate().position(|(i, y)| !used[i] && y == x);
        let found = exact.or_else(|| {
            b.iter()
                .enumerate()
                .position(|(i, y)| !used[i] && same(x, y))
        });
        found.map(|i| used[i] = true).is_some()
    })
}

/// Where an outcome differs from the expected one, or `None`.
pub fn outcome_differs(expected: &Outcome, actual: &Outcome, policy: Policy) -> Option<String> {
    match (expected, actual) {
        (Outcome::Return(a), Outcome::Return(b)) => {
            differs(a, b).map(|at| format!("the return value differs ({at})"))
        }
        (
            Outcome::Raise {
                ty: ta,
                message: ma,
            },
            Outcome::Raise {
                ty: tb,
                message: mb,
            },
        ) => {
            if ta != tb {
                Some(format!("the exception's type differs ({ta} / {tb})"))
            } else if policy.compare_exception_messages && ma != mb {
                Some("the exception's message differs".into())
            } else {
                None
            }
        }
        (Outcome::Return(_), Outcome::Raise { .. }) => {
            Some("the reference returned and the candidate raised".into())
        }
        (Outcome::Raise { .. }, Outcome::Return(_)) => {
            Some("the reference raised and the candidate returned".into())
        }
    }
}

fn thens_differ(expected: &[Then], actual: &[Then], policy: Policy) -> Option<String> {
    if expected.len() != actual.len() {
        return Some("one side made calls of what it returned that the other did not".into());
    }
    expected
        .iter()
        .zip(actual)
        .enumerate()
        .find_map(|(i, (e, a))| {
            let call = match &e.name {
                None => format!("calling the returned function ({i})"),
                Some(name) => format!("calling `{name}` of the returned value ({i})"),
            };
            if e.name != a.name {
                return Some(format!("{call}: the candidate called another attribute"));
            }
            outcome_differs(&e.outcome, &a.outcome, policy)
                .or_else(|| thens_differ(&e.then, &a.then, policy))
                .map(|d| format!("{call}: {d}"))
        })
}

/// Where an observed call differs from the expected one, or `None` when it matches.
pub fn record_differs(expected: &Record, actual: &Record, policy: Policy) -> Option<String> {
    if let Some(d) = outcome_differs(&expected.outcome, &actual.outcome, policy) {
        return Some(d);
    }
    if expected.args.len() != actual.args.len() {
        return Some("the calls differ".into());
    }
    for (i, (e, a)) in expected.args.iter().zip(&actual.args).enumerate() {
        if let Some(at) = differs(e, a) {
            return Some(format!("argument {i} is left in another state ({at})"));
        }
    }
    for (name, e) in &expected.kwargs {
        match actual.kwargs.get(name) {
            Some(a) => {
                if let Some(at) = differs(e, a) {
                    return Some(format!("argument `{name}` is left in another state ({at})"));
                }
            }
            None => return Some("the calls differ".into()),
        }
    }
    match (&expected.instance, &actual.instance) {
        (Some(e), Some(a)) => {
            if let Some(at) = differs(e, a) {
                return Some(format!("the instance is left in another state ({at})"));
            }
        }
        (None, None) => {}
        _ => return Some("one side built an instance and the other did not".into()),
    }
    thens_differ(&expected.then, &actual.then, policy)
        .or_else(|| warnings_differ(&expected.warnings, &actual.warnings, policy))
}

/// Where the warnings of a call differ: their categories, in order, and their messages when
/// the policy compares exception messages.
fn warnings_differ(expected: &[Warned], actual: &[Warned], policy: Policy) -> Option<String> {
    let names = |w: &[Warned]| {
        w.iter()
            .map(|w| w.ty.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if expected.len() != actual.len() || expected.iter().zip(actual).any(|(e, a)| e.ty != a.ty) {
        return Some(format!(
            "the warnings differ ([{}] / [{}])",
            names(expected),
            names(actual)
        ));
    }
    (policy.compare_exception_messages
        && expected
            .iter()
            .zip(actual)
            .any(|(e, a)| e.message != a.message))
    .then(|| "a warning's message differs".into())
}

/// The verdict on one test: its calls against the expected ones.
pub fn test_differs(expected: &[Record], actual: &[Record], policy: Policy) -> Option<String> {
    if expected.len() != actual.len() {
        return Some(format!(
            "the test made {} checks instead of {}",
            actual.len(),
            expected.len()
        ));
    }
    expected
        .iter()
        .zip(actual)
        .enumerate()
        .find_map(|(i, (e, a))| {
            record_differs(e, a, policy).map(|d| {
                if expected.len() > 1 {
                    format!("check {i}: {d}")
                } else {
                    d
                }
            })
        })
}

/// Masks the parts of an expected test's calls that the reference did not reproduce in another
/// run (`again`, in a fresh process): each part of a value (an item, an attribute, a dict's
/// value) where the two runs differ while the value's shape (types, lengths, keys, attribute
/// names) is the same becomes [`Snap::Any`]. How many parts were masked; `None` when the runs
/// differ otherwise (another outcome, another exception, another shape, a whole return value,
/// argument or instance), which leaves the test unstable. What is masked is never compared
/// again; everything else of the test still is.
pub fn mask_test(expected: &mut [Record], again: &[Record], policy: Policy) -> Option<u32> {
    if expected.len() != again.len() {
        return None;
    }
    let mut masked = 0;
    for (e, a) in expected.iter_mut().zip(again) {
        masked += mask_record(e, a, policy)?;
    }
    Some(masked)
}

fn mask_record(e: &mut Record, a: &Record, policy: Policy) -> Option<u32> {
    let mut masked = mask_outcome(&mut e.outcome, &a.outcome, policy)?;
    if e.args.len() != a.args.len() || e.kwargs.len() != a.kwargs.len() {
        return None;
    }
    for (x, y) in e.args.iter_mut().zip(&a.args) {
        masked += mask_root(x, y)?;
    }
    for (name, x) in &mut e.kwargs {
        masked += mask_root(x, a.kwargs.get(name)?)?;
    }
    match (&mut e.instance, &a.instance) {
        (Some(x), Some(y)) => masked += mask_root(x, y)?,
        (None, None) => {}
        _ => return None,
    }
    masked += mask_thens(&mut e.then, &a.then, policy)?;
    // Warnings are never masked: another run that warns otherwise leaves the test unstable.
    if warnings_differ(&e.warnings, &a.warnings, policy).is_some() {
        return None;
    }
    Some(masked)
}

fn mask_thens(e: &mut [Then], a: &[Then], policy: Policy) -> Option<u32> {
    if e.len() != a.len() {
        return None;
    }
    let mut masked = 0;
    for (x, y) in e.iter_mut().zip(a) {
        if x.name != y.name {
            return None;
        }
        masked += mask_outcome(&mut x.outcome, &y.outcome, policy)?;
        masked += mask_thens(&mut x.then, &y.then, policy)?;
    }
    Some(masked)
}

fn mask_outcome(e: &mut Outcome, a: &Outcome, policy: Policy) -> Option<u32> {
    match (e, a) {
        (Outcome::Return(x), Outcome::Return(y)) => mask_root(x, y),
        (e @ Outcome::Raise { .. }, a @ Outcome::Raise { .. }) => {
            outcome_differs(e, a, policy).is_none().then_some(0)
        }
        _ => None,
    }
}

/// A whole value is never masked: only parts of it.
fn mask_root(e: &mut Snap, a: &Snap) -> Option<u32> {
    if same(e, a) {
        return Some(0);
    }
    if is_leaf(e) || is_leaf(a) {
        return None;
    }
    mask_part(e, a)
}

fn is_leaf(s: &Snap) -> bool {
    !matches!(
        s,
        Snap::Seq(_)
            | Snap::Iter(_)
            | Snap::Dict(_)
            | Snap::Exception(_)
            | Snap::Object(_)
            | Snap::Typed(_)
            | Snap::Array(_)
    )
}

fn mask_part(e: &mut Snap, a: &Snap) -> Option<u32> {
    if same(e, a) {
        return Some(0);
    }
    if is_leaf(e) && is_leaf(a) {
        *e = Snap::Any;
        return Some(1);
    }
    let items = |e: &mut [Snap], a: &[Snap]| -> Option<u32> {
        if e.len() != a.len() {
            return None;
        }
        e.iter_mut().zip(a).map(|(x, y)| mask_part(x, y)).sum()
    };
    let fields = |e: &mut BTreeMap<String, Snap>, a: &BTreeMap<String, Snap>| -> Option<u32> {
        if e.len() != a.len() {
            return None;
        }
        e.iter_mut()
            .map(|(name, x)| mask_part(x, a.get(name)?))
            .sum()
    };
    let state =
        |e: &mut Option<BTreeMap<String, Snap>>, a: &Option<BTreeMap<String, Snap>>| match (e, a) {
            (Some(x), Some(y)) => fields(x, y),
            (None, None) => Some(0),
            _ => None,
        };
    match (e, a) {
        (Snap::Seq(x), Snap::Seq(y)) if x.ty == y.ty => {
            Some(items(&mut x.items, &y.items)? + state(&mut x.state, &y.state)?)
        }
        (Snap::Iter(x), Snap::Iter(y)) => items(&mut x.items, &y.items),
        (Snap::Exception(x), Snap::Exception(y)) if x.ty == y.ty => {
            Some(items(&mut x.args, &y.args)? + fields(&mut x.state, &y.state)?)
        }
        (Snap::Object(x), Snap::Object(y)) if x.ty == y.ty => fields(&mut x.state, &y.state),
        (Snap::Typed(x), Snap::Typed(y)) if x.ty == y.ty => mask_part(&mut x.value, &y.value),
        (Snap::Array(x), Snap::Array(y)) if x.dtype == y.dtype && x.shape == y.shape => {
            items(&mut x.items, &y.items)
        }
        (Snap::Dict(x), Snap::Dict(y))
            if x.ty == y.ty && x.len == y.len && x.items.len() == y.items.len() =>
        {
            // The values of the keys both runs hold (a key itself is never masked).
            let mut masked = 0;
            for (k, v) in &mut x.items {
                let (_, w) = y.items.iter().find(|(j, _)| same(k, j))?;
                masked += mask_part(v, w)?;
            }
            Some(masked + state(&mut x.state, &y.state)?)
        }
        _ => None,
    }
}

/// A readable rendering of a snapshot, like Python's repr, cut to `limit` characters.
pub fn render(s: &Snap, limit: usize) -> String {
    let mut out = String::new();
    write(s, &mut out, limit);
    if out.chars().count() > limit {
        let cut: String = out.chars().take(limit.saturating_sub(3)).collect();
        format!("{cut}...")
    } else {
        out
    }
}

/// A readable rendering of an outcome.
pub fn render_outcome(o: &Outcome, limit: usize) -> String {
    match o {
        Outcome::Return(v) => format!("returns {}", render(v, limit)),
        Outcome::Raise { ty, message } if message.is_empty() => format!("raises {ty}"),
        Outcome::Raise { ty, message } => {
            let m: String = message.chars().take(limit).collect();
            format!("raises {ty}: {m}")
        }
    }
}

fn num(n: &Num) -> String {
    match n {
        Num::Number(x) => {
            let text = format!("{x:?}");
            text.strip_suffix(".0")
                .map_or(text.clone(), |t| format!("{t}.0"))
        }
        Num::Special(s) if s == "nan" => "nan".into(),
        Num::Special(s) => s.clone(),
    }
}

fn write(s: &Snap, out: &mut String, limit: usize) {
    if out.len() > limit * 2 {
        return;
    }
    let list = |out: &mut String, items: &[Snap], open: &str, close: &str| {
        out.push_str(open);
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write(item, out, limit);
        }
        out.push_str(close);
    };
    match s {
        Snap::None => out.push_str("None"),
        Snap::Cut => out.push_str("..."),
        Snap::Any => out.push_str("<any>"),
        Snap::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Snap::Int(i) => out.push_str(i),
        Snap::Float(n) => out.push_str(&num(n)),
        Snap::Complex([r, i]) => out.push_str(&format!("complex({}, {})", num(r), num(i))),
        Snap::Str(t) => out.push_str(&format!("{t:?}")),
        Snap::Bytes(h) => out.push_str(&format!("bytes.fromhex({h:?})")),
        Snap::Bytearray(h) => out.push_str(&format!("bytearray.fromhex({h:?})")),
        Snap::Enum(e) => out.push_str(&format!("{}.{}", e.ty, e.name)),
        Snap::Seq(q) => match q.ty.as_str() {
            "tuple" => list(out, &q.items, "(", ")"),
            "list" => list(out, &q.items, "[", "]"),
            ty => {
                out.push_str(ty);
                list(out, &q.items, "([", "])");
            }
        },
        Snap::Iter(q) => list(out, &q.items, "<iterator ", ">"),
        Snap::Set(q) => list(out, &q.items, "{", "}"),
        Snap::Dict(d) => {
            out.push('{');
            for (i, (k, v)) in d.items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(k, out, limit);
                out.push_str(": ");
                write(v, out, limit);
            }
            out.push('}');
        }
        Snap::Exception(e) => {
            out.push_str(&e.ty);
            list(out, &e.args, "(", ")");
        }
        Snap::Object(o) => {
            out.push_str(&o.ty);
            out.push('(');
            for (i, (k, v)) in o.state.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(k);
                out.push('=');
                write(v, out, limit);
            }
            out.push(')');
        }
        Snap::Value(v) => out.push_str(&v.text),
        Snap::Function(n) | Snap::Class(n) | Snap::Module(n) => out.push_str(n),
        Snap::Ref(_) => out.push_str("[...]"),
        Snap::Typed(t) => {
            out.push_str(&t.ty);
            out.push('(');
            write(&t.value, out, limit);
            out.push(')');
        }
        Snap::Array(a) => list(out, &a.items, "array([", "])"),
        Snap::Frame(f) => {
            out.push_str(&f.ty);
            list(out, &f.values, "(", ")");
        }
    }
}

/// A snapshot holding every kind of value, for tests of the encodings that store snapshots.
/// For tests of this crate and of the layers above it (feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub fn sample_of_every_kind() -> Snap {
    serde_json::from_str(
        r#"{"seq": {"type": "list", "state": null, "items": [
            "none", "cut", {"bool": true}, {"int": "123456789012345678901234567890"},
            {"float": 0.5}, {"float": "nan"}, {"complex": [1.0, "-inf"]}, {"str": "é"},
            {"bytes": "00ff"}, {"bytearray": "01"}, {"enum": {"type": "m.Color", "name": "RED"}},
            {"seq": {"type": "tuple", "items": [], "state": {"name": {"str": "x"}}}},
            {"iter": {"type": "generator", "items": [{"int": "1"}]}},
            {"dict": {"type": "dict", "ordered": false, "len": 1, "items": [[{"str": "a"}, {"ref": 1}]]}},
            {"set": {"type": "frozenset", "len": 1, "items": [{"int": "2"}]}},
            {"exception": {"type": "KeyError", "args": [{"str": "k"}], "state": {}}},
            {"object": {"type": "m.P", "state": {"x": {"float": 1.5}}}},
            {"value": {"type": "decimal.Decimal", "text": "1"}},
            {"function": "m.f"}, {"class": "m.P"}, {"module": "m"},
            {"typed": {"type": "numpy.float64", "value": {"float": 2.0}}},
            {"array": {"dtype": "f", "shape": [1], "items": [{"float": "inf"}]}},
            {"frame": {"type": "pandas.DataFrame", "index": [{"int": "0"}], "columns": [{"str": "a"}], "values": [{"int": "1"}]}},
            "any"
        ]}}"#,
    )
    .expect("every kind parses")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_json_and_the_cache_encoding() {
        let every = sample_of_every_kind();
        let json = serde_json::to_string(&every).unwrap();
        assert_eq!(serde_json::from_str::<Snap>(&json).unwrap(), every);
        let bytes = postcard::to_stdvec(&every).unwrap();
        assert_eq!(postcard::from_bytes::<Snap>(&bytes).unwrap(), every);
    }

    fn snap(json: &str) -> Snap {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
    }

    fn outcome(json: &str) -> Outcome {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
    }

    /// The verdict policy as data (`docs/harness.md`): pairs that correct code may produce
    /// (they must match) and pairs that tell right from wrong (they must not).
    #[test]
    fn values_that_must_match_and_values_that_must_not() {
        let must_match = [
            // Floats within tolerance; NaN equals NaN; -0.0 is 0.0.
            (r#"{"float": 0.30000000000000004}"#, r#"{"float": 0.3}"#),
            (r#"{"float": "nan"}"#, r#"{"float": "nan"}"#),
            (r#"{"float": -0.0}"#, r#"{"float": 0.0}"#),
            // A plain dict's order is not part of its value.
            (
                r#"{"dict": {"type": "dict", "ordered": false, "len": 2, "items": [[{"str": "a"}, {"int": "1"}], [{"str": "b"}, {"int": "2"}]]}}"#,
                r#"{"dict": {"type": "dict", "ordered": false, "len": 2, "items": [[{"str": "b"}, {"int": "2"}], [{"str": "a"}, {"int": "1"}]]}}"#,
            ),
            // Nor a set's.
            (
                r#"{"set": {"type": "set", "len": 2, "items": [{"int": "1"}, {"int": "2"}]}}"#,
                r#"{"set": {"type": "set", "len": 2, "items": [{"int": "2"}, {"int": "1"}]}}"#,
            ),
            // Objects by their state; an object without state by its type alone.
            (
                r#"{"object": {"type": "m.P", "state": {"x": {"int": "1"}}}}"#,
                r#"{"object": {"type": "m.P", "state": {"x": {"int": "1"}}}}"#,
            ),
            (
                r#"{"object": {"type": "m.Token", "state": {}}}"#,
                r#"{"object": {"type": "m.Token", "state": {}}}"#,
            ),
            // Standard-library values by their canonical text (Decimal normalized).
            (
                r#"{"value": {"type": "decimal.Decimal", "text": "1"}}"#,
                r#"{"value": {"type": "decimal.Decimal", "text": "1"}}"#,
            ),
        ];
        for (a, b) in must_match {
            assert!(same(&snap(a), &snap(b)), "must match: {a} / {b}");
        }
        let must_not = [
            (r#"{"float": 0.3}"#, r#"{"float": 0.31}"#),
            (r#"{"int": "1"}"#, r#"{"float": 1.0}"#),
            (r#"{"bool": true}"#, r#"{"int": "1"}"#),
            (r#"{"str": "a"}"#, r#"{"str": "A"}"#),
            (
                r#"{"seq": {"type": "list", "items": [{"int": "1"}, {"int": "2"}]}}"#,
                r#"{"seq": {"type": "list", "items": [{"int": "2"}, {"int": "1"}]}}"#,
            ),
            (
                r#"{"seq": {"type": "list", "items": []}}"#,
                r#"{"seq": {"type": "tuple", "items": []}}"#,
            ),
            // An OrderedDict's order is part of its value.
            (
                r#"{"dict": {"type": "collections.OrderedDict", "ordered": true, "len": 2, "items": [[{"str": "a"}, {"int": "1"}], [{"str": "b"}, {"int": "2"}]]}}"#,
                r#"{"dict": {"type": "collections.OrderedDict", "ordered": true, "len": 2, "items": [[{"str": "b"}, {"int": "2"}], [{"str": "a"}, {"int": "1"}]]}}"#,
            ),
            (
                r#"{"object": {"type": "m.P", "state": {"x": {"int": "1"}}}}"#,
                r#"{"object": {"type": "m.P", "state": {"x": {"int": "2"}}}}"#,
            ),
            (
                r#"{"object": {"type": "m.P", "state": {}}}"#,
                r#"{"object": {"type": "m.Q", "state": {}}}"#,
            ),
            (
                r#"{"enum": {"type": "m.Color", "name": "RED"}}"#,
                r#"{"enum": {"type": "m.Color", "name": "BLUE"}}"#,
            ),
        ];
        for (a, b) in must_not {
            assert!(!same(&snap(a), &snap(b)), "must not match: {a} / {b}");
        }
    }

    #[test]
    fn exceptions_match_by_type_and_by_message_only_when_asked() {
        let lt = outcome(
            r#"{"raise": {"type": "TypeError", "message": "'<' not supported between instances of 'str' and 'int'"}}"#,
        );
        let gt = outcome(
            r#"{"raise": {"type": "TypeError", "message": "'>' not supported between instances of 'int' and 'str'"}}"#,
        );
        let value_error = outcome(r#"{"raise": {"type": "ValueError", "message": "x"}}"#);
        let default = Policy::default();
        assert_eq!(outcome_differs(&lt, &gt, default), None);
        assert!(outcome_differs(&lt, &value_error, default).is_some());
        let strict = Policy {
            compare_exception_messages: true,
        };
        assert!(outcome_differs(&lt, &gt, strict).is_some());
        let returned = outcome(r#"{"return": {"int": "3"}}"#);
        assert!(outcome_differs(&returned, &lt, default).is_some());
    }

    #[test]
    fn mutations_instances_and_returned_functions_count() {
        let record = |arg: &str, instance: &str, then: &str| -> Record {
            serde_json::from_str(&format!(
                r#"{{"call": "f(x)", "outcome": {{"return": "none"}}, "args": [{arg}], "kwargs": {{}}, "instance": {instance}, "then": {then}}}"#
            ))
            .unwrap()
        };
        let list = |items: &str| format!(r#"{{"seq": {{"type": "list", "items": [{items}]}}}}"#);
        let base = record(&list(r#"{"int": "1"}"#), "null", "[]");
        assert_eq!(record_differs(&base, &base, Policy::default()), None);
        let mutated = record(&list(r#"{"int": "1"}, {"int": "2"}"#), "null", "[]");
        assert!(
            record_differs(&base, &mutated, Policy::default())
                .unwrap()
                .contains("argument 0")
        );
        let with_instance = record(
            &list(r#"{"int": "1"}"#),
            r#"{"object": {"type": "m.C", "state": {}}}"#,
            "[]",
        );
        assert!(record_differs(&base, &with_instance, Policy::default()).is_some());
        let then =
            |v: &str| format!(r#"[{{"outcome": {{"return": {{"int": "{v}"}}}}, "then": []}}]"#);
        let a = record(&list(""), "null", &then("1"));
        let b = record(&list(""), "null", &then("2"));
        assert!(
            record_differs(&a, &b, Policy::default())
                .unwrap()
                .contains("returned function")
        );
        // A method of the returned value called by name (as the project's tests used it): the
        // name is compared too, and no other run of the reference masks another name.
        let named = |name: &str, v: &str| {
            format!(
                r#"[{{"outcome": {{"return": {{"int": "{v}"}}}}, "then": [], "name": "{name}"}}]"#
            )
        };
        let parse = record(&list(""), "null", &named("parse", "1"));
        assert_eq!(record_differs(&parse, &parse, Policy::default()), None);
        let parse_2 = record(&list(""), "null", &named("parse", "2"));
        assert!(
            record_differs(&parse, &parse_2, Policy::default())
                .unwrap()
                .contains("calling `parse` of the returned value")
        );
        let scan = record(&list(""), "null", &named("scan", "1"));
        assert!(
            record_differs(&parse, &scan, Policy::default())
                .unwrap()
                .contains("another attribute")
        );
        assert!(record_differs(&a, &parse, Policy::default()).is_some());
        let mut masked = parse.clone();
        assert_eq!(mask_record(&mut masked, &scan, Policy::default()), None);
    }

    /// What the module under test warned counts: a missing warning or another category fails,
    /// another message only under `compare_exception_messages`; and another run of the
    /// reference that warns otherwise is never masked.
    #[test]
    fn warnings_count_by_category_and_by_message_only_when_asked() {
        let record = |warnings: &str| -> Record {
            serde_json::from_str(&format!(
                r#"{{"call": "f(x)", "outcome": {{"return": "none"}}, "warnings": [{warnings}]}}"#
            ))
            .unwrap()
        };
        let deprecated = |m: &str| format!(r#"{{"type": "DeprecationWarning", "message": "{m}"}}"#);
        let warned = record(&deprecated("n is deprecated"));
        let loose = Policy::default();
        let strict = Policy {
            compare_exception_messages: true,
        };
        assert_eq!(record_differs(&warned, &warned, strict), None);
        let silent = record("");
        let d = record_differs(&warned, &silent, loose).expect("a missing warning fails");
        assert!(d.contains("DeprecationWarning"), "{d}");
        assert!(record_differs(&silent, &warned, loose).is_some());
        let user = record(r#"{"type": "UserWarning", "message": "n is deprecated"}"#);
        assert!(record_differs(&warned, &user, loose).is_some());
        let twice = record(&format!("{0}, {0}", deprecated("n is deprecated")));
        assert!(record_differs(&warned, &twice, loose).is_some());
        let reworded = record(&deprecated("pass n"));
        assert_eq!(record_differs(&warned, &reworded, loose), None);
        assert!(record_differs(&warned, &reworded, strict).is_some());
        // A record of an older r2e, without the field, reads as one that warned nothing.
        let old: Record =
            serde_json::from_str(r#"{"call": "f(x)", "outcome": {"return": "none"}}"#).unwrap();
        assert_eq!(record_differs(&old, &silent, strict), None);
        let mut expected = vec![warned.clone()];
        assert_eq!(mask_test(&mut expected, &[silent], loose), None);
        assert_eq!(mask_test(&mut expected, &[warned], loose), Some(0));
    }

    /// A part the reference does not reproduce in a fresh process (a cached hash of strings) is
    /// masked and matches anything; the rest of the test still tells right from wrong. A whole
    /// value, another shape or another outcome is never masked.
    #[test]
    fn parts_the_reference_does_not_reproduce_are_masked_and_nothing_else() {
        let record = |hash: &str, item: &str| -> Record {
            serde_json::from_str(&format!(
                r#"{{"call": "ns.get()", "outcome": {{"return": {{"object": {{"type": "m.Namespaces", "state": {{"_hash": {{"int": "{hash}"}}, "items": {{"seq": {{"type": "list", "items": [{{"str": "{item}"}}]}}}}}}}}}}}}}}"#
            ))
            .unwrap()
        };
        let policy = Policy::default();
        let mut expected = vec![record("4453025580942433374", "a")];
        let again = vec![record("822895218258989270", "a")];
        assert!(test_differs(&expected, &again, policy).is_some());
        assert_eq!(mask_test(&mut expected, &again, policy), Some(1));
        assert_eq!(test_differs(&expected, &again, policy), None);
        // Any hash now, in any process; the items are still compared.
        assert_eq!(test_differs(&expected, &[record("7", "a")], policy), None);
        assert!(test_differs(&expected, &[record("7", "b")], policy).is_some());
        let shown = render_outcome(&expected[0].outcome, 200);
        assert!(shown.contains("_hash=<any>"), "{shown}");

        let returns = |v: &str| -> Vec<Record> {
            vec![
                serde_json::from_str(&format!(
                    r#"{{"call": "f()", "outcome": {{"return": {v}}}}}"#
                ))
                .unwrap(),
            ]
        };
        // A whole return value that differs: unstable, not masked.
        let mut whole = returns(r#"{"int": "1"}"#);
        assert_eq!(
            mask_test(&mut whole, &returns(r#"{"int": "2"}"#), policy),
            None
        );
        // Another shape (a list of another length): not masked.
        let list = |items: &str| format!(r#"{{"seq": {{"type": "list", "items": [{items}]}}}}"#);
        let mut shape = returns(&list(r#"{"int": "1"}"#));
        let longer = returns(&list(r#"{"int": "1"}, {"int": "2"}"#));
        assert_eq!(mask_test(&mut shape, &longer, policy), None);
        // Another outcome: not masked.
        let raised: Vec<Record> =
            vec![serde_json::from_str(
            r#"{"call": "f()", "outcome": {"raise": {"type": "KeyError", "message": "k"}}}"#,
        )
        .unwrap()];
        assert_eq!(mask_test(&mut shape, &raised, policy), None);
    }

    #[test]
    fn renderings_read_like_python() {
        let s = snap(
            r#"{"seq": {"type": "list", "items": [{"int": "1"}, {"str": "a"}, {"float": 2.5}, "none", {"bool": true}]}}"#,
        );
        assert_eq!(render(&s, 100), r#"[1, "a", 2.5, None, True]"#);
        assert_eq!(render(&s, 8), "[1, \"...");
        let o = outcome(r#"{"raise": {"type": "KeyError", "message": "'x'"}}"#);
        assert_eq!(render_outcome(&o, 50), "raises KeyError: 'x'");
    }
}
