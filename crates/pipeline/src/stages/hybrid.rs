//! `generator = "hybrid"`: the built-in explorer first; the model only for the candidates it
//! left short of the selection threshold. When both harnesses are valid, the model's tests join
//! the built-in ones (one harness, validated again); otherwise the better harness wins.

use r2e_exec::target::Target;

/// One harness with the built-in tests and the model's: the model's top-level classes and
/// functions are renamed (`Model<Name>`, `model_<name>`, and every use of them in its code) so
/// that none replaces a built-in one, and its code is bound to the implementation under test and
/// the reference again.
pub fn merge_harnesses(builtin: &str, model: &str, target: &Target) -> String {
    let (head, _) = super::llmgen::header(target);
    let main = "if __name__ == \"__main__\":";
    let builtin = builtin
        .find(main)
        .map_or(builtin, |at| &builtin[..at])
        .trim_end();
    let body = model.strip_prefix(head.as_str()).unwrap_or(model);
    let body = body.find(main).map_or(body, |at| &body[..at]).trim();
    let bindings: Vec<&str> = head.lines().rev().take(2).collect();
    let defined: Vec<(String, String)> = body
        .lines()
        .filter_map(|l| {
            let (kind, rest) = l
                .strip_prefix("class ")
                .map(|r| ("class", r))
                .or_else(|| l.strip_prefix("def ").map(|r| ("def", r)))?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then(|| {
                let new = if kind == "class" {
                    format!("Model{name}")
                } else {
                    format!("model_{name}")
                };
                (name, new)
            })
        })
        .collect();
    let mut body = body.to_owned();
    for (old, new) in &defined {
        body = rename_identifier(&body, old, new);
    }
    format!(
        "{builtin}\n\n\n# Tests written by the model.\n{}\n{}\n\n{body}\n\n\n{main}\n    unittest.main()\n",
        bindings[1], bindings[0]
    )
}

/// `text` with the identifier `old` (not an attribute, not part of a longer name) renamed.
fn rename_identifier(text: &str, old: &str, new: &str) -> String {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (at, _) in text.match_indices(old) {
        let before = text[..at].chars().next_back();
        let after = text[at + old.len()..].chars().next();
        if at >= last && !ident(before) && before != Some('.') && !ident(after) {
            out.push_str(&text[last..at]);
            out.push_str(new);
            last = at + old.len();
        }
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_harnesses_keep_the_model_code_apart_from_the_builtin_code() {
        let target = Target::new(std::path::Path::new("/r"), "m.py", "m".into(), "f", (1, 2));
        let builtin = "import unittest\n\ndef helper():\n    return 1\n\nclass TestF(unittest.TestCase):\n    def test_0(self):\n        helper()\n\nif __name__ == \"__main__\":\n    unittest.main()\n";
        let (head, _) = crate::stages::llmgen::header(&target);
        let model = format!(
            "{head}\ndef helper():\n    return 2\n\nclass TestF(unittest.TestCase):\n    def test_0(self):\n        self.assertEqual(f(helper()), reference_f(helper()))\n        x.helper()\n"
        );
        let merged = merge_harnesses(builtin, &model, &target);
        assert!(merged.contains("def helper():\n    return 1"));
        assert!(merged.contains("def model_helper():\n    return 2"));
        assert!(merged.contains("class ModelTestF(unittest.TestCase)"));
        assert!(merged.contains("f(model_helper()), reference_f(model_helper())"));
        assert!(merged.contains("x.helper()"), "attributes keep their names");
        assert_eq!(merged.matches("unittest.main()").count(), 1);
        assert!(r2e_python::extract::summarize(&merged).is_ok());
    }
}
