//! No import loops inside a crate: the modules of each crate form layers, every dependency
//! pointing one way.
//!
//! The checker reads each listed crate's `src/` (test code left out: files named `tests.rs`
//! or `*_tests.rs`, folders named `tests`, and every item behind `#[cfg(test)]`, such as
//! `#[cfg(test)] mod tests { … }`), finds every path that names a module of the same crate:
//! `use crate::…` lines (grouped `use crate::{a, b::c}` trees expanded), `crate::a::b` paths
//! written inline in code, `super::` and `self::` paths, paths through a child module the file
//! declares (`mod x;` then `x::f()`) and paths through a name a `use` line brought in. Comments
//! and string literals are not code and are left out. Each path maps to a node: a top-level
//! module of the crate (`crate::rates::Rates` is `rates`), the crate root (`lib.rs`) for an
//! item defined there, and for the modules a crate lists as split (ctl's `cmd` and `remote`)
//! each child module on its own (`crate::cmd::sweep::run` is `cmd::sweep`). An edge is "a
//! file of node A names node B"; a strongly connected component of more than one node is a
//! loop, and the test fails naming one cycle of it with the file and line of every edge.
//! A crate may list loops it still has on purpose (`allowed` in [`CRATES`], each with why);
//! such an entry must still be a loop with exactly those members, or the test fails asking
//! to remove it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// A crate checked: its folder, the modules whose children are nodes of their own, and the
/// loops it may still have.
struct Crate {
    dir: &'static str,
    split: &'static [&'static str],
    /// Loops left on purpose, each as its members: a loop with exactly these members is not
    /// reported, and one that no longer exists (or that gained or lost a member) fails the
    /// test, so the list cannot go stale. Each entry says why it is there.
    allowed: &'static [&'static [&'static str]],
}

/// The crates checked: every crate of the workspace with more than a handful of modules.
const CRATES: &[Crate] = &[
    Crate {
        dir: "core",
        split: &[],
        allowed: &[],
    },
    Crate {
        dir: "ctl",
        split: &["cmd", "remote"],
        allowed: &[],
    },
    Crate {
        dir: "coordinator",
        split: &[],
        allowed: &[],
    },
    Crate {
        dir: "worker",
        split: &[],
        allowed: &[],
    },
    Crate {
        dir: "viewer",
        split: &[],
        allowed: &[],
    },
];

/// The source with comments and the contents of string and character literals blanked (line
/// breaks kept, so line numbers still hold).
fn strip(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if ch == 'r'
            && (i == 0 || !ident(c[i - 1]) || (c[i - 1] == 'b' && (i < 2 || !ident(c[i - 2]))))
            && matches!(next, Some('"') | Some('#'))
            && {
                let mut j = i + 1;
                while c.get(j) == Some(&'#') {
                    j += 1;
                }
                c.get(j) == Some(&'"')
            }
        {
            let mut hashes = 0;
            i += 1;
            while c[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            while i < c.len() {
                if c[i] == '"' && (0..hashes).all(|k| c.get(i + 1 + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                if c[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
        } else if ch == '"' {
            i += 1;
            out.push_str("\"\"");
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if c.get(i) == Some(&'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
        } else if ch == '\'' && next == Some('\\') {
            i += 2;
            while i < c.len() && c[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if ch == '\'' && c.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(ch);
            i += 1;
        }
    }
    out
}

/// A token of stripped source: an identifier or one punctuation (`::` is one token).
#[derive(Debug, Clone, PartialEq)]
struct Tok {
    text: String,
    line: usize,
}

fn tokens(code: &str) -> Vec<Tok> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(Tok {
                text: c[start..i].iter().collect(),
                line,
            });
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Tok {
                text: ch.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// The tokens without the items behind `#[cfg(test)]`: the attribute, any attributes after
/// it and the item up to its `;` or its balanced `{ … }` block.
fn without_test_items(toks: Vec<Tok>) -> Vec<Tok> {
    let is = |toks: &[Tok], at: usize, want: &[&str]| {
        want.iter()
            .enumerate()
            .all(|(k, w)| toks.get(at + k).is_some_and(|t| t.text == *w))
    };
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        if !is(&toks, i, &["#", "[", "cfg", "(", "test", ")", "]"]) {
            out.push(toks[i].clone());
            i += 1;
            continue;
        }
        i += 7;
        let mut depth = 0i32;
        while i < toks.len() {
            match toks[i].text.as_str() {
                "(" | "[" => depth += 1,
                ")" | "]" => depth -= 1,
                ";" if depth == 0 => {
                    i += 1;
                    break;
                }
                "{" if depth == 0 => {
                    let mut braces = 0;
                    while i < toks.len() {
                        match toks[i].text.as_str() {
                            "{" => braces += 1,
                            "}" => braces -= 1,
                            _ => {}
                        }
                        i += 1;
                        if braces == 0 {
                            break;
                        }
                    }
                    break;
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

fn is_ident(t: &Tok) -> bool {
    t.text
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// A path written in the source: its segments, its line, whether a `use` wrote it and the
/// name it binds there (its last segment or its `as` alias).
#[derive(Debug, Clone, PartialEq)]
struct Written {
    segments: Vec<String>,
    line: usize,
    binds: Option<String>,
}

/// Parses a path at `toks[*i]`, group trees (`a::{b, c::d}`) expanded, into `out`.
fn path_tree(toks: &[Tok], i: &mut usize, prefix: &[String], in_use: bool, out: &mut Vec<Written>) {
    let mut segments = prefix.to_vec();
    let line = toks[*i].line;
    while let Some(t) = toks.get(*i) {
        if t.text == "{" {
            *i += 1;
            loop {
                match toks.get(*i).map(|t| t.text.as_str()) {
                    None => return,
                    Some("}") => {
                        *i += 1;
                        return;
                    }
                    Some(",") => *i += 1,
                    Some(_) if is_ident(&toks[*i]) || toks[*i].text == "{" => {
                        path_tree(toks, i, &segments, in_use, out)
                    }
                    Some(_) => *i += 1,
                }
            }
        }
        if !is_ident(t) {
            break;
        }
        segments.push(t.text.clone());
        *i += 1;
        if toks.get(*i).is_some_and(|t| t.text == "::") {
            *i += 1;
        } else {
            break;
        }
    }
    if segments.len() == prefix.len() {
        return;
    }
    let mut binds = None;
    if in_use {
        binds = segments.last().cloned();
        if toks.get(*i).is_some_and(|t| t.text == "as") {
            binds = toks.get(*i + 1).map(|t| t.text.clone());
            *i += 2;
        }
        if binds.as_deref() == Some("self") {
            binds = segments.iter().rev().nth(1).cloned();
        }
    }
    out.push(Written {
        segments,
        line,
        binds,
    });
}

/// Every path in the tokens, and the child modules the file declares (`mod x;`, `mod x {`).
fn paths(toks: &[Tok]) -> (Vec<Written>, BTreeSet<String>) {
    let mut out = Vec::new();
    let mut children = BTreeSet::new();
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        let prev = i.checked_sub(1).map(|p| toks[p].text.as_str());
        if t.text == "mod" && toks.get(i + 1).is_some_and(is_ident) {
            children.insert(toks[i + 1].text.clone());
            i += 2;
        } else if is_ident(t) && !matches!(prev, Some("::") | Some("$") | Some(".") | Some("'")) {
            let in_use = prev == Some("use");
            path_tree(toks, &mut i, &[], in_use, &mut out);
        } else {
            i += 1;
        }
    }
    (out, children)
}

/// The module path of a source file relative to `src/`: `lib.rs` is the root, `a.rs` and
/// `a/mod.rs` are `a`, `a/b.rs` is `a::b`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// The crate's node naming `abs` (a path from the crate root), or `None` for a path outside
/// its modules. `modules` holds every module path that has a file.
fn node_of(abs: &[String], modules: &BTreeSet<Vec<String>>, split: &[&str]) -> Option<String> {
    let Some(first) = abs.first() else {
        return Some("crate".into());
    };
    if !modules.contains(&vec![first.clone()]) {
        return Some("crate".into());
    }
    if split.contains(&first.as_str()) {
        if let Some(second) = abs.get(1) {
            if modules.contains(&vec![first.clone(), second.clone()]) {
                return Some(format!("{first}::{second}"));
            }
        }
    }
    Some(first.clone())
}

/// Where an edge comes from: the file, the line and the path written.
type Evidence = (String, usize, String);

/// The crate's module graph: for each node, the nodes it names, each with its first evidence.
type Graph = BTreeMap<String, BTreeMap<String, Vec<Evidence>>>;

/// Builds the module graph of one crate from its files (`(path relative to src/, text)`).
fn graph(files: &[(String, String)], split: &[&str]) -> Graph {
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(rel, _)| module_of(rel)).collect();
    let mut g = Graph::new();
    for (rel, text) in files {
        let here = module_of(rel);
        let Some(from) = node_of(&here, &modules, split) else {
            continue;
        };
        g.entry(from.clone()).or_default();
        let (written, children) = paths(&without_test_items(tokens(&strip(text))));
        let mut bound: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut resolved = Vec::new();
        for w in &written {
            let mut s = w.segments.clone();
            if s.last().is_some_and(|l| l == "self") {
                s.pop();
            }
            if s.is_empty() || (s.len() == 1 && matches!(s[0].as_str(), "crate" | "self" | "super"))
            {
                continue;
            }
            let abs = match s[0].as_str() {
                "crate" => Some(s[1..].to_vec()),
                "self" => Some(here.iter().chain(&s[1..]).cloned().collect()),
                "super" => {
                    let ups = s.iter().take_while(|x| *x == "super").count();
                    (ups <= here.len()).then(|| {
                        here[..here.len() - ups]
                            .iter()
                            .chain(&s[ups..])
                            .cloned()
                            .collect()
                    })
                }
                first if children.contains(first) => Some(here.iter().chain(&s).cloned().collect()),
                first => bound
                    .get(first)
                    .map(|b| b.iter().chain(&s[1..]).cloned().collect()),
            };
            let Some(abs) = abs else { continue };
            if let Some(name) = &w.binds {
                bound.insert(name.clone(), abs.clone());
            }
            resolved.push((abs, w));
        }
        for (abs, w) in resolved {
            let Some(to) = node_of(&abs, &modules, split) else {
                continue;
            };
            if to != from {
                g.entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .push((rel.clone(), w.line, w.segments.join("::")));
            }
        }
    }
    g
}

/// The loops of a graph: each strongly connected component of more than one node, as its
/// members and one shortest cycle through its first member.
fn loops(g: &Graph) -> Vec<(BTreeSet<String>, Vec<String>)> {
    // Tarjan's algorithm, iterative enough for a few hundred nodes by recursion.
    struct State<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on.insert(v);
        let g = s.g;
        for w in g.get(v).into_iter().flat_map(|m| m.keys()) {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    let mut found = Vec::new();
    for comp in s.out.into_iter().filter(|c| c.len() > 1) {
        let start = comp.iter().next().unwrap().clone();
        // Breadth-first from `start` inside the component back to `start`.
        let mut prev: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = VecDeque::from([start.clone()]);
        'search: while let Some(v) = queue.pop_front() {
            for w in g[&v].keys().filter(|w| comp.contains(*w)) {
                if *w == start {
                    prev.insert(start.clone(), v.clone());
                    break 'search;
                }
                if !prev.contains_key(w) {
                    prev.insert(w.clone(), v.clone());
                    queue.push_back(w.clone());
                }
            }
        }
        let mut cycle = vec![start.clone()];
        let mut at = prev[&start].clone();
        while at != start {
            cycle.push(at.clone());
            at = prev[&at].clone();
        }
        cycle.push(start.clone());
        cycle.reverse();
        found.push((comp, cycle));
    }
    found
}

/// One loop described: its members, then each edge of the cycle with where it is written.
fn describe(krate: &str, g: &Graph, members: &BTreeSet<String>, cycle: &[String]) -> String {
    let mut s = format!(
        "{krate}: an import loop of {} modules ({})\n  cycle: {}\n",
        members.len(),
        members.iter().cloned().collect::<Vec<_>>().join(", "),
        cycle.join(" -> ")
    );
    for pair in cycle.windows(2) {
        let (file, line, path) = &g[&pair[0]][&pair[1]][0];
        s.push_str(&format!(
            "    {} -> {}: {krate}/src/{file}:{line} `{path}`\n",
            pair[0], pair[1]
        ));
    }
    s
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" && name != "bin" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

/// The crate's library sources, relative to its `src/` (`main.rs` beside a `lib.rs` and
/// `src/bin/` are other crates).
fn sources(krate: &str) -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("core sits in the workspace")
        .join(krate)
        .join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&f).expect("reads a source file");
            (rel, text)
        })
        .filter(|(rel, _)| rel != "main.rs")
        .collect()
}

fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn edges(g: &Graph) -> Vec<(String, String)> {
    g.iter()
        .flat_map(|(a, m)| m.keys().map(|b| (a.clone(), b.clone())))
        .collect()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

#[test]
fn a_two_module_loop_is_found_and_named() {
    let g = graph(
        &files(&[
            ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
            ("a.rs", "use crate::b::Thing;\n"),
            (
                "b.rs",
                "pub struct Thing;\nfn f() {\n    crate::a::g();\n}\n",
            ),
            ("c.rs", "use crate::a;\n"),
        ]),
        &[],
    );
    let found = loops(&g);
    assert_eq!(found.len(), 1, "{found:?}");
    let (members, cycle) = &found[0];
    assert_eq!(members.iter().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(cycle, &["a", "b", "a"]);
    let text = describe("x", &g, members, cycle);
    assert!(
        text.contains("a -> b: x/src/a.rs:1 `crate::b::Thing`"),
        "{text}"
    );
    assert!(
        text.contains("b -> a: x/src/b.rs:3 `crate::a::g`"),
        "{text}"
    );
}

#[test]
fn a_layered_graph_has_no_loop() {
    let g = graph(
        &files(&[
            ("a.rs", "use crate::b::Thing;\nuse crate::c;\n"),
            ("b.rs", "use crate::c::X;\n"),
            ("c.rs", "pub struct X;\n"),
        ]),
        &[],
    );
    assert_eq!(edges(&g), [pair("a", "b"), pair("a", "c"), pair("b", "c")]);
    assert!(loops(&g).is_empty());
}

#[test]
fn a_longer_loop_is_named_in_order() {
    let g = graph(
        &files(&[
            ("a.rs", "use crate::b;"),
            ("b/mod.rs", "mod inner;"),
            ("b/inner.rs", "fn f() { super::super::c::g() }"),
            ("c.rs", "use crate::{d::Y, a};"),
            ("d.rs", ""),
        ]),
        &[],
    );
    let found = loops(&g);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].1, ["a", "b", "c", "a"]);
}

#[test]
fn grouped_inline_relative_and_bound_paths_are_edges() {
    let g = graph(
        &files(&[
            (
                "a.rs",
                "use crate::{b::{self, X as Y}, c};\n\
                 use super::e as ee;\n\
                 fn f() -> crate::d::T { ee::z(); g::h() }\n\
                 mod g;\n",
            ),
            ("a/g.rs", "fn h() { super::super::f::i() }"),
            ("b.rs", ""),
            ("c.rs", ""),
            ("d.rs", ""),
            ("e.rs", ""),
            ("f.rs", ""),
        ]),
        &[],
    );
    assert_eq!(
        edges(&g),
        [
            pair("a", "b"),
            pair("a", "c"),
            pair("a", "d"),
            pair("a", "e"),
            pair("a", "f")
        ]
    );
}

#[test]
fn comments_strings_and_test_items_are_not_edges() {
    let g = graph(
        &files(&[
            (
                "a.rs",
                "//! See [`crate::b::X`].\n\
                 /* crate::c::Y /* nested */ crate::c::Z */\n\
                 const S: &str = \"crate::d::W\";\n\
                 const R: &str = r#\"crate::d::\"V\"#;\n\
                 const C: char = '\"'; fn f<'a>(x: &'a str) {}\n\
                 #[cfg(test)]\nuse crate::e::Q;\n\
                 #[cfg(test)]\nmod tests {\n    use crate::e::P;\n    fn t() { crate::e::q() }\n}\n\
                 pub(crate) fn kept() -> crate::f::Kept {}\n",
            ),
            ("b.rs", ""),
            ("c.rs", ""),
            ("d.rs", ""),
            ("e.rs", ""),
            ("f.rs", ""),
        ]),
        &[],
    );
    assert_eq!(edges(&g), [pair("a", "f")]);
}

#[test]
fn split_modules_give_each_child_a_node_of_its_own() {
    let g = graph(
        &files(&[
            (
                "lib.rs",
                "pub mod cmd;\npub mod remote;\npub fn helper() {}\nfn main() { cmd::run::go() }\n",
            ),
            (
                "cmd/mod.rs",
                "pub mod sweep;\npub mod run;\nfn f() { sweep::go() }\n",
            ),
            (
                "cmd/sweep/mod.rs",
                "use crate::remote::submit;\nfn g() { submit::x() }",
            ),
            (
                "cmd/run.rs",
                "use crate::remote::{self};\nfn g() { remote::watch::w() }",
            ),
            ("remote/mod.rs", "pub mod submit;\npub mod watch;"),
            ("remote/submit.rs", "use crate::cmd::run::Opts;"),
            ("remote/watch.rs", "fn f() { crate::helper() }"),
        ]),
        &["cmd", "remote"],
    );
    assert_eq!(
        edges(&g),
        [
            pair("cmd", "cmd::sweep"),
            pair("cmd::run", "remote"),
            pair("cmd::run", "remote::watch"),
            pair("cmd::sweep", "remote::submit"),
            pair("crate", "cmd::run"),
            pair("remote::submit", "cmd::run"),
            pair("remote::watch", "crate"),
        ]
    );
    let found = loops(&g);
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].0.iter().collect::<Vec<_>>(),
        ["cmd::run", "crate", "remote::watch"]
    );
}

/// The report of one crate's graph: every loop not in `allowed`, and every entry of
/// `allowed` that is not a loop of the graph (with exactly those members) any more.
fn check(krate: &str, g: &Graph, allowed: &[&[&str]]) -> String {
    let mut report = String::new();
    let found = loops(g);
    for (members, cycle) in &found {
        let listed = allowed
            .iter()
            .any(|a| a.iter().map(|m| m.to_string()).collect::<BTreeSet<_>>() == *members);
        if !listed {
            report.push_str(&describe(krate, g, members, cycle));
        }
    }
    for a in allowed {
        let want: BTreeSet<String> = a.iter().map(|m| m.to_string()).collect();
        if !found.iter().any(|(members, _)| *members == want) {
            report.push_str(&format!(
                "{krate}: the allowed loop ({}) is not a loop of the crate any more; fix: \
                 remove it from `allowed` in CRATES (or list the loop's members as they are now)\n",
                a.join(", ")
            ));
        }
    }
    report
}

#[test]
fn an_allowed_loop_is_left_out_and_a_stale_one_is_named() {
    let g = graph(
        &files(&[
            ("a.rs", "use crate::b::X;"),
            ("b.rs", "use crate::a::Y;"),
            ("c.rs", "use crate::d::X;"),
            ("d.rs", "use crate::c::Y;"),
        ]),
        &[],
    );
    assert_eq!(check("x", &g, &[&["a", "b"], &["c", "d"]]), "");
    let one_left = check("x", &g, &[&["a", "b"]]);
    assert!(
        one_left.contains("x: an import loop of 2 modules (c, d)"),
        "{one_left}"
    );
    assert!(!one_left.contains("(a, b)"), "{one_left}");
    let stale = check("x", &g, &[&["a", "b"], &["c", "d"], &["a", "c"]]);
    assert!(
        stale.contains("x: the allowed loop (a, c) is not a loop of the crate any more"),
        "{stale}"
    );
    let grown = check("x", &g, &[&["a", "b", "c"], &["c", "d"]]);
    assert!(
        grown.contains("an import loop of 2 modules (a, b)"),
        "{grown}"
    );
    assert!(
        grown.contains("the allowed loop (a, b, c) is not a loop"),
        "{grown}"
    );
}

#[test]
fn no_crate_has_an_import_loop_between_its_modules() {
    let mut report = String::new();
    for krate in CRATES {
        let files = sources(krate.dir);
        assert!(files.len() > 5, "found {}'s sources", krate.dir);
        let g = graph(&files, krate.split);
        assert!(g.len() > 5, "{} has modules: {:?}", krate.dir, g.keys());
        report.push_str(&check(krate.dir, &g, krate.allowed));
    }
    assert!(report.is_empty(), "import loops:\n{report}");
}
