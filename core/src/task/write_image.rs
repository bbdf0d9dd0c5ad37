//! Writing a built image into `task.toml` (`akbench image build`): `environment.image` (or
//! Harbor's `environment.docker_image`, when that is the key the task uses) set to the
//! pushed reference, and each built sidecar's pin in `[environment.service_images]`, every
//! other line (comments, order, formatting) kept as written.

/// The key of `[environment]` `akbench image build` writes the image to: the one the task
/// uses (`docker_image` or `image`); for a task naming none, Harbor's `docker_image` when the
/// task is written for Harbor (`schema_version` or `[task]`; Harbor then runs the image
/// instead of building the Dockerfile), else akbench's `image`.
pub fn image_key(task_toml: &toml::Table) -> &'static str {
    let env = task_toml.get("environment").and_then(|e| e.as_table());
    if env.is_some_and(|t| t.contains_key("docker_image")) {
        "docker_image"
    } else if env.is_some_and(|t| t.contains_key("image")) {
        "image"
    } else if task_toml.contains_key("schema_version") || task_toml.contains_key("task") {
        "docker_image"
    } else {
        "image"
    }
}

/// [`image_key`] of a task.toml's text (`image` when it does not parse).
pub fn image_key_of(text: &str) -> &'static str {
    toml::from_str::<toml::Table>(text).map_or("image", |t| image_key(&t))
}

/// `text` (a task.toml) with the image of `[environment]` set to `image`: the existing
/// `image = ...` (or `docker_image = ...`) line replaced, else `image` added right below the
/// section header, else the section appended. Refused when the file does not parse or
/// writes the environment in a form this edit does not handle (inline table, dotted keys);
/// the result is checked to parse with exactly that image.
pub fn set_image(text: &str, image: &str) -> Result<String, String> {
    let parsed: toml::Table =
        toml::from_str(text).map_err(|e| format!("task.toml does not parse: {e}"))?;
    let env = parsed.get("environment");
    let key = image_key(&parsed);
    let lines: Vec<&str> = text.lines().collect();
    let is_header = |l: &str| {
        let t = l.trim_start();
        t.starts_with('[')
    };
    let header = lines.iter().position(|l| {
        let t = l.trim();
        t == "[environment]"
            || t.starts_with("[environment]") && t[13..].trim_start().starts_with('#')
    });
    let line = format!("{key} = {}", toml::Value::String(image.to_string()));
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    match header {
        Some(h) => {
            let end = (h + 1..lines.len())
                .find(|&i| is_header(lines[i]))
                .unwrap_or(lines.len());
            let existing = (h + 1..end).find(|&i| {
                let t = lines[i].trim_start();
                t.strip_prefix(key)
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            });
            match existing {
                Some(i) => out[i] = line,
                None => out.insert(h + 1, line),
            }
        }
        None if env.is_some() => {
            return Err("`environment` is written as an inline table or dotted keys; fix: write it as an `[environment]` section, or set `image` by hand".into());
        }
        None => {
            if out.last().is_some_and(|l| !l.trim().is_empty()) {
                out.push(String::new());
            }
            out.push("[environment]".into());
            out.push(line);
        }
    }
    let mut written = out.join("\n");
    written.push('\n');
    let check: toml::Table = toml::from_str(&written)
        .map_err(|e| format!("the edited task.toml does not parse ({e}); set `image` by hand"))?;
    let got = check
        .get("environment")
        .and_then(|e| e.get(key))
        .and_then(|v| v.as_str());
    if got != Some(image) {
        return Err("the edited task.toml does not hold the image; set `image` by hand".into());
    }
    Ok(written)
}

/// `text` (a task.toml) with each `(service, pinned image)` of `pins` in
/// `[environment.service_images]`: a service's existing line replaced, else added right
/// below the section header, else the section appended. Refused when the file does not
/// parse or writes the table in another form (inline table, dotted keys); the result is
/// checked to parse with exactly those pins.
pub fn set_service_images(text: &str, pins: &[(String, String)]) -> Result<String, String> {
    const HEADER: &str = "[environment.service_images]";
    let parsed: toml::Table =
        toml::from_str(text).map_err(|e| format!("task.toml does not parse: {e}"))?;
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| {
        let t = l.trim();
        t == HEADER || t.starts_with(HEADER) && t[HEADER.len()..].trim_start().starts_with('#')
    });
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let written =
        |name: &str, image: &str| format!("{name} = {}", toml::Value::String(image.to_string()));
    match header {
        Some(h) => {
            for (name, image) in pins.iter().rev() {
                let end = (h + 1..out.len())
                    .find(|&i| out[i].trim_start().starts_with('['))
                    .unwrap_or(out.len());
                let existing = (h + 1..end).find(|&i| {
                    let t = out[i].trim_start();
                    let t = t
                        .strip_prefix('"')
                        .and_then(|r| r.strip_prefix(name.as_str()))
                        .and_then(|r| r.strip_prefix('"'))
                        .or_else(|| t.strip_prefix(name.as_str()));
                    t.is_some_and(|rest| rest.trim_start().starts_with('='))
                });
                match existing {
                    Some(i) => out[i] = written(name, image),
                    None => out.insert(h + 1, written(name, image)),
                }
            }
        }
        None if parsed
            .get("environment")
            .and_then(|e| e.get("service_images"))
            .is_some() =>
        {
            return Err("`environment.service_images` is written as an inline table or dotted keys; fix: write it as an `[environment.service_images]` section, or set the images by hand".into());
        }
        None => {
            if out.last().is_some_and(|l| !l.trim().is_empty()) {
                out.push(String::new());
            }
            out.push(HEADER.into());
            out.extend(pins.iter().map(|(n, i)| written(n, i)));
        }
    }
    let mut edited = out.join("\n");
    edited.push('\n');
    let check: toml::Table = toml::from_str(&edited).map_err(|e| {
        format!(
            "the edited task.toml does not parse ({e}); set `[environment.service_images]` by hand"
        )
    })?;
    for (name, image) in pins {
        let got = check
            .get("environment")
            .and_then(|e| e.get("service_images"))
            .and_then(|t| t.get(name))
            .and_then(|v| v.as_str());
        if got != Some(image.as_str()) {
            return Err(format!("the edited task.toml does not hold the image of service `{name}`; set `[environment.service_images]` by hand"));
        }
    }
    Ok(edited)
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMG: &str = "127.0.0.1:5000/akbench/t:1.0@sha256:0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn the_image_line_is_replaced_added_or_its_section_appended_and_the_rest_kept() {
        for (before, after) in [
            (
                "version = \"1.0\"\n# keep me\n[environment]\nimage = \"old:1\" # was\nworkdir = \"/app\"\n[source]\nrepo = \"r\"\n",
                format!("version = \"1.0\"\n# keep me\n[environment]\nimage = \"{IMG}\"\nworkdir = \"/app\"\n[source]\nrepo = \"r\"\n"),
            ),
            (
                "version = \"1.0\"\n[environment] # env\nbuild_timeout_sec = 600.0\n\n[verifier]\ntimeout_sec = 1.0\n",
                format!("version = \"1.0\"\n[environment] # env\nimage = \"{IMG}\"\nbuild_timeout_sec = 600.0\n\n[verifier]\ntimeout_sec = 1.0\n"),
            ),
            (
                "version = \"1.0\"\n[verifier]\ntimeout_sec = 1.0",
                format!("version = \"1.0\"\n[verifier]\ntimeout_sec = 1.0\n\n[environment]\nimage = \"{IMG}\"\n"),
            ),
            (
                // Harbor's name of the key is kept.
                "version = \"1.0\"\n[environment]\ndocker_image = \"base:1\"\nos = \"linux\"\n",
                format!("version = \"1.0\"\n[environment]\ndocker_image = \"{IMG}\"\nos = \"linux\"\n"),
            ),
            (
                // A Harbor task naming no image yet: Harbor's key.
                "schema_version = \"1.1\"\n[environment]\ncpus = 1\n",
                format!("schema_version = \"1.1\"\n[environment]\ndocker_image = \"{IMG}\"\ncpus = 1\n"),
            ),
            (
                "schema_version = \"1.1\"\n",
                format!("schema_version = \"1.1\"\n\n[environment]\ndocker_image = \"{IMG}\"\n"),
            ),
            (
                // `images` is another key, not `image`.
                "version = \"1.0\"\n[environment]\nimages_note = \"x\"\n",
                format!("version = \"1.0\"\n[environment]\nimage = \"{IMG}\"\nimages_note = \"x\"\n"),
            ),
        ] {
            assert_eq!(set_image(before, IMG).unwrap(), after, "{before}");
        }
    }

    #[test]
    fn service_pins_are_replaced_added_or_their_section_appended_and_the_rest_kept() {
        let pins = |names: &[&str]| -> Vec<(String, String)> {
            names
                .iter()
                .map(|n| (n.to_string(), IMG.to_string()))
                .collect()
        };
        for (before, names, after) in [
            (
                "version = \"1.0\"\n[environment]\nworkdir = \"/app\"\n",
                &["kv", "db"][..],
                format!("version = \"1.0\"\n[environment]\nworkdir = \"/app\"\n\n[environment.service_images]\nkv = \"{IMG}\"\ndb = \"{IMG}\"\n"),
            ),
            (
                // An existing line (quoted or bare) replaced, a new one added, the rest kept.
                "version = \"1.0\"\n[environment.service_images] # built\n\"kv\" = \"old@sha256:1\"\nweb = \"w\"\n[verifier]\ntimeout_sec = 1.0\n",
                &["kv", "db"][..],
                format!("version = \"1.0\"\n[environment.service_images] # built\ndb = \"{IMG}\"\nkv = \"{IMG}\"\nweb = \"w\"\n[verifier]\ntimeout_sec = 1.0\n"),
            ),
            (
                // `kv2` is another service, not `kv`.
                "version = \"1.0\"\n[environment.service_images]\nkv2 = \"x\"\n",
                &["kv"][..],
                format!("version = \"1.0\"\n[environment.service_images]\nkv = \"{IMG}\"\nkv2 = \"x\"\n"),
            ),
        ] {
            assert_eq!(set_service_images(before, &pins(names)).unwrap(), after, "{before}");
        }
        for (text, needle) in [
            (
                "[environment]\nservice_images = { kv = \"x\" }\n",
                "inline table",
            ),
            ("[environment]\nservice_images.kv = \"x\"\n", "dotted keys"),
            ("environment = { workdir = \"/app\" }\n", "does not parse"),
            ("version = \n", "does not parse"),
        ] {
            let e = set_service_images(text, &pins(&["kv"])).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn forms_it_cannot_edit_are_refused_naming_the_fix() {
        for (text, needle) in [
            (
                "version = \"1\"\nenvironment = { workdir = \"/app\" }\n",
                "inline table",
            ),
            (
                "version = \"1\"\nenvironment.workdir = \"/app\"\n",
                "dotted keys",
            ),
            ("version = \n", "does not parse"),
        ] {
            let e = set_image(text, IMG).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
