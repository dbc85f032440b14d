//! A repository's licence, as an SPDX id, from its own files: what its metadata declares
//! (`pyproject.toml`'s `[project] license`, `PKG-INFO`'s `License-Expression`), else what its
//! licence file says (the texts of the common licences by their telling sentences), else its
//! metadata's free text and classifiers. `None` when nothing tells; the dataset card then says
//! "unknown" rather than guess.

/// The licence files read, in this order, after the metadata (`pyproject.toml`, `PKG-INFO`)
/// and before `setup.cfg`.
const LICENSE_FILES: &[&str] = &[
    "LICENSE",
    "LICENSE.txt",
    "LICENSE.md",
    "LICENSE.rst",
    "LICENCE",
    "LICENCE.txt",
    "COPYING",
    "COPYING.txt",
];

/// The licence of the repository whose files `read` gives by relative path.
pub fn detect(read: impl Fn(&str) -> Option<String>) -> Option<String> {
    let pyproject = read("pyproject.toml");
    let pkg_info = read("PKG-INFO");
    // An SPDX expression the project wrote (PEP 639).
    if let Some(id) = pyproject.as_deref().and_then(pyproject_license) {
        return Some(id);
    }
    if let Some(id) = pkg_info
        .as_deref()
        .and_then(|t| header(t, "License-Expression"))
        .and_then(|e| normalize(&e))
    {
        return Some(id);
    }
    for name in LICENSE_FILES {
        if let Some(id) = read(name).as_deref().and_then(from_text) {
            return Some(id);
        }
    }
    let free = [
        pkg_info.as_deref().and_then(|t| header(t, "License")),
        read("setup.cfg").as_deref().and_then(setup_cfg_license),
    ];
    if let Some(id) = free.into_iter().flatten().find_map(|t| normalize(&t)) {
        return Some(id);
    }
    pkg_info.as_deref().and_then(classifier)
}

/// `[project] license = "MIT"` or `license = { text = "MIT" }`.
fn pyproject_license(text: &str) -> Option<String> {
    let doc: toml::Table = toml::from_str(text).ok()?;
    let license = doc.get("project")?.get("license")?;
    let text = match license {
        toml::Value::String(s) => s.clone(),
        toml::Value::Table(t) => t.get("text")?.as_str()?.to_owned(),
        _ => return None,
    };
    normalize(&text)
}

/// The first value of an RFC 822 header of `PKG-INFO` (before the body).
fn header(text: &str, name: &str) -> Option<String> {
    text.lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().to_owned())
        })
        .filter(|v| !v.is_empty() && !v.eq_ignore_ascii_case("UNKNOWN"))
}

/// `license = ...` under `[metadata]` of `setup.cfg` (not `license_files`).
fn setup_cfg_license(text: &str) -> Option<String> {
    let mut in_metadata = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_metadata = t == "[metadata]";
            continue;
        }
        if in_metadata
            && let Some((k, v)) = t.split_once('=')
            && k.trim() == "license"
        {
            let v = v.trim();
            return (!v.is_empty()).then(|| v.to_owned());
        }
    }
    None
}

/// `Classifier: License :: OSI Approved :: MIT License`.
fn classifier(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("Classifier:"))
        .filter_map(|c| c.trim().strip_prefix("License ::"))
        .find_map(|c| normalize(c.rsplit("::").next().unwrap_or(c)))
}

/// An SPDX id for a licence's name as projects write it, or `None` when it is not one of the
/// common ones.
pub fn normalize(name: &str) -> Option<String> {
    let n = name.trim().trim_end_matches('.').to_ascii_lowercase();
    let n = n.trim_end_matches(" license").trim_end_matches(" licence");
    let id = match n {
        "mit" | "expat" | "the mit" => "MIT",
        "apache-2.0"
        | "apache 2.0"
        | "apache 2"
        | "apache-2"
        | "apache software"
        | "apache license 2.0"
        | "apache license, version 2.0"
        | "asl 2"
        | "apache" => "Apache-2.0",
        "bsd-3-clause"
        | "bsd 3-clause"
        | "bsd-3"
        | "new bsd"
        | "modified bsd"
        | "3-clause bsd"
        | "bsd 3-clause \"new\" or \"revised\"" => "BSD-3-Clause",
        "bsd-2-clause" | "bsd 2-clause" | "simplified bsd" | "2-clause bsd" | "freebsd" => {
            "BSD-2-Clause"
        }
        "bsd" => "BSD-3-Clause",
        "isc" => "ISC",
        "mpl-2.0" | "mozilla public license 2.0 (mpl 2.0)" | "mpl 2.0" => "MPL-2.0",
        "gpl-3.0" | "gpl-3.0-only" | "gplv3" | "gnu general public license v3 (gplv3)" => "GPL-3.0",
        "gpl-3.0-or-later" | "gnu general public license v3 or later (gplv3+)" | "gplv3+" => {
            "GPL-3.0-or-later"
        }
        "gpl-2.0" | "gpl-2.0-only" | "gplv2" | "gnu general public license v2 (gplv2)" => "GPL-2.0",
        "lgpl-3.0" | "lgplv3" | "gnu lesser general public license v3 (lgplv3)" => "LGPL-3.0",
        "lgpl-2.1" | "lgplv2.1" | "gnu lesser general public license v2 (lgplv2)" => "LGPL-2.1",
        "unlicense" | "the unlicense (unlicense)" | "public domain" => "Unlicense",
        "psf" | "psf-2.0" | "python software foundation" => "PSF-2.0",
        "0bsd" => "0BSD",
        "zlib" | "zlib/libpng" => "Zlib",
        _ => {
            // An SPDX id written as it is (`MIT OR Apache-2.0` stays an expression).
            let t = name.trim();
            let spdx_like = !t.is_empty()
                && t.len() <= 64
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || " .-+()".contains(c))
                && (t.contains(" OR ") || t.contains(" AND "));
            return spdx_like.then(|| t.to_owned());
        }
    };
    Some(id.to_owned())
}

/// The licence a licence file's text is, by sentences that only it has.
fn from_text(text: &str) -> Option<String> {
    let t: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let has = |s: &str| t.contains(s);
    let id = if has("Apache License") && has("Version 2.0") {
        "Apache-2.0"
    } else if has("Mozilla Public License Version 2.0")
        || has("Mozilla Public License, version 2.0")
    {
        "MPL-2.0"
    } else if has("GNU LESSER GENERAL PUBLIC LICENSE") {
        if has("Version 3") {
            "LGPL-3.0"
        } else {
            "LGPL-2.1"
        }
    } else if has("GNU GENERAL PUBLIC LICENSE") {
        if has("Version 3") {
            "GPL-3.0"
        } else {
            "GPL-2.0"
        }
    } else if has("Permission is hereby granted, free of charge") {
        "MIT"
    } else if has("Redistribution and use in source and binary forms") {
        if has("Neither the name") || has("names of its contributors") {
            "BSD-3-Clause"
        } else {
            "BSD-2-Clause"
        }
    } else if has("Permission to use, copy, modify, and/or distribute this software")
        || has(
            "Permission to use, copy, modify, and distribute this software for any purpose with or without fee",
        )
    {
        "ISC"
    } else if has("This is free and unencumbered software released into the public domain") {
        "Unlicense"
    } else if has("PYTHON SOFTWARE FOUNDATION LICENSE") {
        "PSF-2.0"
    } else {
        return None;
    };
    Some(id.to_owned())
}

/// The Hugging Face Hub's id for an SPDX licence (its `license:` front matter), when it has one.
pub fn hub_id(spdx: &str) -> Option<&'static str> {
    Some(match spdx {
        "MIT" => "mit",
        "Apache-2.0" => "apache-2.0",
        "BSD-3-Clause" => "bsd-3-clause",
        "BSD-2-Clause" => "bsd-2-clause",
        "ISC" => "isc",
        "MPL-2.0" => "mpl-2.0",
        "GPL-3.0" | "GPL-3.0-or-later" => "gpl-3.0",
        "GPL-2.0" => "gpl-2.0",
        "LGPL-3.0" => "lgpl-3.0",
        "LGPL-2.1" => "lgpl-2.1",
        "Unlicense" => "unlicense",
        "0BSD" => "0bsd",
        "Zlib" => "zlib",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect();
        move |name| {
            owned
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.clone())
        }
    }

    #[test]
    fn metadata_wins_then_the_licence_file_then_free_text() {
        let mit_text = "MIT License\n\nCopyright (c) 2020 X\n\nPermission is hereby granted, free of\n  charge, to any person";
        assert_eq!(
            detect(files(&[
                (
                    "pyproject.toml",
                    "[project]\nname = \"a\"\nlicense = \"Apache-2.0\"\n"
                ),
                ("LICENSE", mit_text)
            ])),
            Some("Apache-2.0".into())
        );
        assert_eq!(
            detect(files(&[(
                "pyproject.toml",
                "[project]\nlicense = { text = \"BSD\" }\n"
            )])),
            Some("BSD-3-Clause".into())
        );
        assert_eq!(
            detect(files(&[("LICENSE.txt", mit_text)])),
            Some("MIT".into())
        );
        assert_eq!(
            detect(files(&[(
                "PKG-INFO",
                "Metadata-Version: 2.1\nName: a\nLicense: MIT License\n\nbody"
            )])),
            Some("MIT".into())
        );
        assert_eq!(
            detect(files(&[(
                "PKG-INFO",
                "Metadata-Version: 2.1\nLicense: UNKNOWN\nClassifier: License :: OSI Approved :: Apache Software License\n\n"
            )])),
            Some("Apache-2.0".into())
        );
        assert_eq!(
            detect(files(&[(
                "setup.cfg",
                "[metadata]\nname = a\nlicense = ISC\nlicense_files = LICENSE\n"
            )])),
            Some("ISC".into())
        );
        let bsd3 = "Redistribution and use in source and binary forms, with or without modification... Neither the name of the copyright holder";
        assert_eq!(
            detect(files(&[("COPYING", bsd3)])),
            Some("BSD-3-Clause".into())
        );
        assert_eq!(detect(files(&[("README.md", "MIT")])), None);
        assert_eq!(detect(files(&[("LICENSE", "All rights reserved.")])), None);
    }

    #[test]
    fn names_projects_write_become_spdx_ids() {
        assert_eq!(normalize("MIT License").as_deref(), Some("MIT"));
        assert_eq!(normalize("Apache 2.0").as_deref(), Some("Apache-2.0"));
        assert_eq!(
            normalize("MIT OR Apache-2.0").as_deref(),
            Some("MIT OR Apache-2.0")
        );
        assert_eq!(normalize("see LICENSE file"), None);
        assert_eq!(hub_id("BSD-3-Clause"), Some("bsd-3-clause"));
        assert_eq!(hub_id("MIT OR Apache-2.0"), None);
    }
}
