use super::cache::{victims, Entry};
use super::layer::{action, compression, detect, kept_mode, Action, Compression};
use super::manifest::{choose, container_env, parse, run_config, Document, RunConfig};
use super::registry::{docker_config_auth, insecure_list, parse_challenge, scheme, Challenge};
use super::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[test]
fn references_parse_into_registry_repository_tag_and_digest() {
    let cases: &[(&str, &str, &str, Option<&str>, bool)] = &[
        ("debian", "docker.io", "library/debian", None, false),
        (
            "debian:bookworm",
            "docker.io",
            "library/debian",
            Some("bookworm"),
            false,
        ),
        (
            "akbench/base:1",
            "docker.io",
            "akbench/base",
            Some("1"),
            false,
        ),
        (
            "127.0.0.1:5000/akbench/base:v1",
            "127.0.0.1:5000",
            "akbench/base",
            Some("v1"),
            false,
        ),
        ("localhost/x", "localhost", "x", None, false),
        (
            "localhost:5000/a/b/c",
            "localhost:5000",
            "a/b/c",
            None,
            false,
        ),
        (
            "reg.example/a_b/c-d.e__f",
            "reg.example",
            "a_b/c-d.e__f",
            None,
            false,
        ),
    ];
    for (s, reg, repo, tag, _) in cases {
        let r = ImageRef::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            (*reg, *repo, *tag),
            "{s}"
        );
        assert_eq!(r.digest, None);
    }
    let r = ImageRef::parse(&format!("127.0.0.1:5000/base:v1@{D}")).unwrap();
    assert_eq!(r.digest.as_deref(), Some(D));
    assert_eq!(r.reference(), D);
    assert_eq!(r.pinned(D), format!("127.0.0.1:5000/base@{D}"));
    assert_eq!(r.to_string(), format!("127.0.0.1:5000/base:v1@{D}"));
    let r = ImageRef::parse("127.0.0.1:5000/base").unwrap();
    assert_eq!(r.reference(), "latest");
    assert_eq!(ImageRef::parse(&r.to_string()).unwrap(), r);
}

#[test]
fn bad_references_are_refused_naming_the_problem() {
    let cases: &[(&str, &str)] = &[
        ("", "empty"),
        (" debian", "white space"),
        ("deb ian", "white space"),
        ("Debian", "lowercase"),
        ("a//b", "lowercase path"),
        ("-a/b", "lowercase path"),
        ("a/b-", "lowercase path"),
        ("a/b:", "tag"),
        ("a/b:-x", "tag"),
        ("a/b:x/y", "lowercase path"),
        ("a/b@sha256:abc", "64 lowercase hex"),
        ("a/b@sha512:0123", "64 lowercase hex"),
        (
            &format!("a/b@{}", D.to_uppercase().replace("SHA256", "sha256")),
            "64 lowercase hex",
        ),
        ("host:99999/a", "registry"),
        ("host:/a", "registry"),
        ("ho_st.x/a", "registry"),
        ("a/b$c", "lowercase path"),
    ];
    for (s, want) in cases {
        let e = ImageRef::parse(s).expect_err(s).to_string();
        assert!(e.contains(want), "{s}: {e}");
        assert!(e.starts_with('`'), "{e}");
    }
    assert!(ImageRef::parse(&"a".repeat(600))
        .unwrap_err()
        .to_string()
        .contains("512"));
}

#[test]
fn digests_are_sha256_and_64_lowercase_hex() {
    assert!(is_digest(D));
    assert_eq!(digest_hex(D), Some(&D[7..]));
    for bad in [
        "",
        "sha256:",
        "sha256:abc",
        &D[..70],
        &D.replace('a', "A"),
        &D.replace("sha256", "sha512"),
        &format!("{D}0"),
        &D.replace('0', "g"),
    ] {
        assert!(!is_digest(bad), "{bad}");
        assert_eq!(digest_hex(bad), None);
    }
}

#[test]
fn base64_round_trips_and_refuses_garbage() {
    for s in ["", "a", "ab", "abc", "user:pass", "ü:\u{1F600}"] {
        let enc = base64_encode(s.as_bytes());
        assert_eq!(
            base64_decode(&enc).as_deref(),
            Some(s.as_bytes()),
            "{s} {enc}"
        );
    }
    assert_eq!(base64_encode(b"user:pass"), "dXNlcjpwYXNz");
    assert_eq!(base64_decode("dXNlcjpwYXNz").unwrap(), b"user:pass");
    assert_eq!(base64_decode("d$=="), None);
    assert_eq!(base64_decode("a"), None);
}

#[test]
fn layer_entries_map_to_actions_and_never_leave_the_root() {
    let p = PathBuf::from;
    let cases: Vec<(&str, Result<Action, &str>)> = vec![
        ("./", Ok(Action::Root)),
        (".", Ok(Action::Root)),
        ("/", Ok(Action::Root)),
        ("./usr/bin/python3", Ok(Action::Put(p("usr/bin/python3")))),
        ("/etc/passwd", Ok(Action::Put(p("etc/passwd")))),
        ("a/./b", Ok(Action::Put(p("a/b")))),
        ("etc/.wh.motd", Ok(Action::Remove(p("etc/motd")))),
        (".wh.opt", Ok(Action::Remove(p("opt")))),
        ("var/lib/.wh..wh..opq", Ok(Action::Opaque(p("var/lib")))),
        (".wh..wh..opq", Ok(Action::Opaque(p("")))),
        ("../etc/shadow", Err("climbs out")),
        ("a/../../b", Err("climbs out")),
        ("a/..", Err("climbs out")),
        ("etc/.wh.", Err("names no entry")),
        ("etc/.wh...", Err("names no entry")),
    ];
    for (name, want) in cases {
        match (action(Path::new(name)), want) {
            (Ok(got), Ok(w)) => assert_eq!(got, w, "{name}"),
            (Err(got), Err(w)) => assert!(got.contains(w), "{name}: {got}"),
            (got, w) => panic!("{name}: got {got:?}, want {w:?}"),
        }
    }
}

#[test]
fn a_layer_is_read_in_the_compression_its_bytes_are_in() {
    for (head, want) in [
        (&[0x1f, 0x8b, 0x08, 0x00][..], Compression::Gzip),
        (&[0x28, 0xb5, 0x2f, 0xfd, 0x04][..], Compression::Zstd),
        (b"etc/\0\0\0\0".as_slice(), Compression::None),
        (&[0x1f][..], Compression::None),
        (&[][..], Compression::None),
    ] {
        assert_eq!(detect(head), want, "{head:?}");
    }
}

#[test]
fn layer_media_types_and_kept_modes() {
    assert_eq!(
        compression("application/vnd.oci.image.layer.v1.tar+gzip"),
        Some(Compression::Gzip)
    );
    assert_eq!(
        compression("application/vnd.docker.image.rootfs.diff.tar.gzip"),
        Some(Compression::Gzip)
    );
    assert_eq!(
        compression("application/vnd.oci.image.layer.v1.tar+zstd"),
        Some(Compression::Zstd)
    );
    assert_eq!(
        compression("application/vnd.oci.image.layer.v1.tar"),
        Some(Compression::None)
    );
    assert_eq!(
        compression("application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"),
        None
    );
    assert_eq!(
        compression("application/vnd.oci.image.layer.v1.tar+encrypted"),
        None
    );
    assert_eq!(kept_mode(0o4755), 0o755);
    assert_eq!(kept_mode(0o2755), 0o755);
    assert_eq!(kept_mode(0o1777), 0o1777);
    assert_eq!(kept_mode(0o100644), 0o644);
}

#[test]
fn manifests_and_indexes_parse_and_the_host_platform_is_chosen() {
    let m = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{D}","size":10}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{D}","size":20}}]}}"#
    );
    match parse(m.as_bytes(), "").unwrap() {
        Document::Image { config, layers } => {
            assert_eq!(config.size, 10);
            assert_eq!(layers.len(), 1);
            assert_eq!(layers[0].size, 20);
        }
        other => panic!("{other:?}"),
    }
    let i = format!(
        r#"{{"manifests":[{{"digest":"{D}","size":1,"platform":{{"os":"linux","architecture":"arm64"}}}},{{"digest":"{}","size":2,"platform":{{"os":"linux","architecture":"amd64"}}}}]}}"#,
        D.replace('0', "1")
    );
    let Document::Index(list) = parse(i.as_bytes(), "").unwrap() else {
        panic!("not an index")
    };
    assert_eq!(choose(&list, "amd64").unwrap().size, 2);
    assert_eq!(choose(&list, "arm64").unwrap().size, 1);
    let e = choose(&list, "riscv64").unwrap_err();
    assert!(
        e.contains("linux/riscv64") && e.contains("linux/arm64, linux/amd64"),
        "{e}"
    );
    assert!(parse(b"{}", "x").unwrap_err().contains("neither"));
    assert!(parse(b"nope", "x").unwrap_err().contains("not JSON"));
    let bad = m.replacen(D, "sha256:abc", 1);
    assert!(parse(bad.as_bytes(), "")
        .unwrap_err()
        .contains("not a sha256 digest"));
}

#[test]
fn the_image_configuration_gives_env_workdir_and_user() {
    let c = run_config(br#"{"config":{"Env":["PATH=/usr/bin:/bin","A=b=c","BROKEN"],"WorkingDir":"/app","User":"1000:1000"}}"#).unwrap();
    assert_eq!(
        c.env,
        vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("A".into(), "b=c".into())
        ]
    );
    assert_eq!(c.working_dir.as_deref(), Some("/app"));
    assert_eq!(c.user.as_deref(), Some("1000:1000"));
    assert!(c.entrypoint.is_empty());
    let c = run_config(br#"{"config":{"Entrypoint":["/usr/local/bin/start.sh","--x"]}}"#).unwrap();
    assert_eq!(c.entrypoint, ["/usr/local/bin/start.sh", "--x"]);
    let c = run_config(br#"{"config":{"Entrypoint":null}}"#).unwrap();
    assert_eq!(c, RunConfig::default());
    let c = run_config(br#"{"config":{"WorkingDir":"","User":""}}"#).unwrap();
    assert_eq!(c, RunConfig::default());
    assert_eq!(run_config(b"{}").unwrap(), RunConfig::default());
    assert!(run_config(b"[").is_err());
}

#[test]
fn the_container_environment_is_the_images_plus_the_attempts_without_host_toolchain() {
    let image = RunConfig {
        env: vec![
            ("PATH".into(), "/opt/py/bin:/usr/bin".into()),
            ("LANG".into(), "C.UTF-8".into()),
        ],
        ..RunConfig::default()
    };
    let spec: BTreeMap<String, String> = [
        ("PATH", "/root/.cargo/bin:/usr/bin"),
        ("CARGO_HOME", "/root/.cargo"),
        ("RUSTUP_HOME", "/root/.rustup"),
        ("HOME", "/w/home"),
        ("LANG", "en_US.UTF-8"),
        ("AKBENCH_WORKSPACE", "/app"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let env = container_env(&image, &spec, &["/opt/node/bin".into(), "/usr/bin".into()]);
    assert_eq!(env["PATH"], "/opt/py/bin:/usr/bin:/opt/node/bin");
    assert_eq!(env["HOME"], "/w/home");
    assert_eq!(env["LANG"], "en_US.UTF-8");
    assert!(!env.contains_key("CARGO_HOME") && !env.contains_key("RUSTUP_HOME"));
    let env = container_env(&RunConfig::default(), &BTreeMap::new(), &[]);
    assert_eq!(
        env["PATH"],
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    );
}

#[test]
fn insecure_registries_are_host_port_only() {
    assert_eq!(insecure_list("").unwrap(), Vec::<String>::new());
    assert_eq!(
        insecure_list("127.0.0.1:5000, reg.local:8080,").unwrap(),
        vec!["127.0.0.1:5000", "reg.local:8080"]
    );
    for bad in [
        "127.0.0.1",
        "http://a:1",
        "a:0",
        "a:70000",
        "a b:1",
        ":5000",
    ] {
        let e = insecure_list(bad).unwrap_err();
        assert!(
            e.contains("AKBENCH_INSECURE_REGISTRIES") && e.contains("host:port"),
            "{bad}: {e}"
        );
    }
    let list = vec!["127.0.0.1:5000".to_string()];
    assert_eq!(scheme("127.0.0.1:5000", &list), "http");
    assert_eq!(scheme("127.0.0.1:5001", &list), "https");
    assert_eq!(scheme("docker.io", &[]), "https");
}

#[test]
fn docker_config_credentials_are_found_by_registry_host() {
    let cfg = r#"{"auths":{
        "https://index.docker.io/v1/":{"auth":"aHViOnNlY3JldA=="},
        "127.0.0.1:5000":{"auth":"dXNlcjpwYXNz"},
        "http://reg.local:8080":{"username":"u","password":"p"},
        "tok.example":{"identitytoken":"T"},
        "bad.example":{"auth":"***"},
        "nocolon.example":{"auth":"bm9jb2xvbg=="}
    }}"#;
    let get = |r: &str| docker_config_auth(cfg, r);
    let c = get("docker.io").unwrap().unwrap();
    assert_eq!(
        (c.username.as_str(), c.password.as_str()),
        ("hub", "secret")
    );
    let c = get("127.0.0.1:5000").unwrap().unwrap();
    assert_eq!((c.username.as_str(), c.password.as_str()), ("user", "pass"));
    assert!(
        !format!("{c:?}").contains("pass"),
        "credentials are not printed"
    );
    let c = get("reg.local:8080").unwrap().unwrap();
    assert_eq!((c.username.as_str(), c.password.as_str()), ("u", "p"));
    assert_eq!(get("tok.example").unwrap().unwrap().password, "T");
    assert_eq!(get("other.example").unwrap(), None);
    assert!(get("bad.example").unwrap_err().contains("not base64"));
    assert!(get("nocolon.example")
        .unwrap_err()
        .contains("user:password"));
    assert!(docker_config_auth("{", "x")
        .unwrap_err()
        .contains("not a docker config"));
}

#[test]
fn token_challenges_parse() {
    assert_eq!(parse_challenge("Basic realm=\"r\""), Some(Challenge::Basic));
    assert_eq!(
        parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="reg.example",scope="repository:a/b:pull""#
        ),
        Some(Challenge::Bearer {
            realm: "https://auth.example/token".into(),
            service: Some("reg.example".into()),
            scope: Some("repository:a/b:pull".into()),
        })
    );
    assert_eq!(
        parse_challenge("bearer realm=http://127.0.0.1:1/t"),
        Some(Challenge::Bearer {
            realm: "http://127.0.0.1:1/t".into(),
            service: None,
            scope: None
        })
    );
    assert_eq!(parse_challenge("Bearer service=x"), None);
    assert_eq!(parse_challenge("Negotiate x"), None);
}

#[test]
fn garbage_collection_removes_the_least_recently_used_never_one_in_use() {
    let e = |d: &str, bytes, last_used| Entry {
        digest: d.into(),
        bytes,
        last_used,
    };
    let entries = vec![
        e("a", 100, 1),
        e("b", 100, 3),
        e("c", 100, 2),
        e("d", 100, 4),
    ];
    let none = BTreeSet::new();
    let in_use = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<BTreeSet<_>>();
    let cases: Vec<(u64, BTreeSet<String>, Vec<&str>)> = vec![
        (400, none.clone(), vec![]),
        (399, none.clone(), vec!["a"]),
        (200, none.clone(), vec!["a", "c"]),
        (0, none.clone(), vec!["a", "c", "b", "d"]),
        (200, in_use(&["a"]), vec!["c", "b"]),
        (0, in_use(&["a", "d"]), vec!["c", "b"]),
    ];
    for (max, used, want) in cases {
        assert_eq!(
            victims(&entries, &used, max),
            want,
            "max {max} in use {used:?}"
        );
    }
}
