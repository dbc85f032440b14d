//! Unit tests of the typed records: their lines written and read back, and the build summary.

use super::*;

#[test]
fn a_functions_path_is_the_middle_of_its_id() {
    assert_eq!(function_path("r:pkg/m.py:C.f", "r"), "pkg/m.py");
    assert_eq!(function_path("r:pkg/m.py:f#2", "r"), "pkg/m.py");
    // A path may hold `:` and start like the repository's name; a qualified name may not.
    assert_eq!(function_path("r:r:odd/a:b.py:f", "r"), "r:odd/a:b.py");
}

#[test]
fn records_round_trip_and_keep_their_field_order() {
    let line = br#"{"id":"r:m.py:f","generator":"builtin","valid":false,"tests":0,"branches":0,"branch_coverage":null,"line_coverage":null,"failure_class":"import_env","failure_message":"no env","in_file":true}"#;
    let h: HarnessRecord = serde_json::from_slice(line).unwrap();
    assert_eq!(h.failure_class, Some(FailureClass::ImportEnv));
    assert_eq!(to_line(&h), [&line[..], b"\n"].concat());
    let f = FunctionRecord {
        id: "r:m.py:f".into(),
        repo: "r".into(),
        qualname: "f".into(),
        kind: FunctionKind::Function,
        start_line: 1,
        end_line: 2,
        docstring: None,
        excluded_by: Some(Filter::NoDocstring),
        created_at: Some("2025-07-14T10:00:00Z".into()),
        changed_at: None,
        slice: None,
    };
    let text = String::from_utf8(to_line(&f)).unwrap();
    assert!(text.contains(r#""excluded_by":"no_docstring""#), "{text}");
    let back: FunctionRecord = serde_json::from_str(&text).unwrap();
    assert_eq!(back, f);
    for filter in Filter::ALL {
        assert_eq!(
            serde_json::to_value(filter).unwrap(),
            serde_json::json!(filter.name())
        );
    }
}

#[test]
fn a_slice_is_the_closure_of_its_node_in_the_graph() {
    let lines = [
        r#"{"kind":"def","name":"r:a.py:f","deps":[1,4]}"#,
        r#"{"kind":"def","name":"r:a.py:g","deps":[0,2,3,5]}"#,
        r#"{"kind":"def","name":"r:b.py:h","deps":[3,5,6]}"#,
        r#"{"kind":"global","name":"b.K","deps":[]}"#,
        r#"{"kind":"global","name":"a.K","deps":[]}"#,
        r#"{"kind":"global","name":"a.K","deps":[]}"#,
        r#"{"kind":"unresolved","name":"np.array","deps":[]}"#,
    ];
    let nodes: Vec<SliceNode<'static>> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(to_line(&nodes[6]), [lines[6].as_bytes(), b"\n"].concat());
    let graph = SliceGraph { nodes };
    let s = graph.slice(0);
    // Nearest first; the function itself (reached again through g) is not in its slice;
    // names bound to nothing are listed apart.
    assert_eq!(s.items, [(1, 1), (4, 1), (2, 2), (3, 2), (5, 2)]);
    assert_eq!(s.functions, ["r:a.py:g", "r:b.py:h"]);
    assert_eq!(s.globals, ["a.K", "b.K"]);
    assert_eq!(s.unresolved, ["np.array"]);
    assert_eq!(graph.slice(3), FullSlice::default());
    assert_eq!(graph.slice(99), FullSlice::default());
}

#[test]
fn repo_rows_keep_every_repository_in_order() {
    let rows = RepoCounts::rows(
        ["a", "empty"],
        [
            ("a", None),
            ("a", Some(Filter::Dunder)),
            ("a", Some(Filter::Dunder)),
            ("other", Some(Filter::NoDocstring)),
        ],
        Some(vec![("a", true)]),
        Some(vec![]),
    );
    let names: Vec<&str> = rows.iter().map(|r| r.repo.as_str()).collect();
    assert_eq!(names, ["a", "empty", "other"]);
    assert_eq!(
        (rows[0].functions, rows[0].candidates, rows[0].excluded),
        (3, 1, 2)
    );
    assert_eq!(
        rows[0].text(),
        "3 functions, 1 candidates, 2 excluded (dunder 2), 1 valid harnesses, 0 instances"
    );
    assert_eq!(
        rows[1].text(),
        "0 functions, 0 candidates, 0 excluded, 0 valid harnesses, 0 instances"
    );
    let json = serde_json::to_value(&rows[2]).unwrap();
    assert_eq!(json["excluded_by"]["no_docstring"], 1);
    assert_eq!(
        json["excluded_by"].as_object().unwrap().len(),
        Filter::ALL.len()
    );
    // Before `generate`, no harness or instance numbers.
    let early = RepoCounts::rows(["a"], [("a", None)], None, None);
    assert_eq!(early[0].text(), "1 functions, 1 candidates, 0 excluded");
    assert!(
        serde_json::to_value(&early[0])
            .unwrap()
            .get("instances")
            .is_none()
    );
}

#[test]
fn a_bad_line_is_named_by_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    std::fs::write(&path, "{\"id\": 1}\n").unwrap();
    let err = read_jsonl::<HarnessRecord>(&path).unwrap_err().to_string();
    assert!(err.contains("h.jsonl:1:"), "{err}");
    assert!(
        read_jsonl::<HarnessRecord>(&dir.path().join("none"))
            .unwrap()
            .is_none()
    );
}
