//! The sandbox's seccomp filter: a classic-BPF program, handed to bubblewrap with
//! `--seccomp FD`, that refuses with `EPERM` the system calls a coding agent never needs and
//! that reach the kernel's most privileged or least audited code (docs/agents.md lists them
//! and why). Everything else is allowed: the filter is a deny list on top of the uid, the
//! dropped capabilities and the namespaces, not the confinement itself.
//!
//! The program checks the architecture first: a system call made through another ABI (a
//! 32-bit call on x86_64, or x32) is refused too, so the numbers cannot be dodged.

use std::os::fd::{FromRawFd, OwnedFd};

/// A CPU architecture the filter knows the system call numbers of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// x86_64 (`AUDIT_ARCH_X86_64`).
    X86_64,
    /// aarch64 (`AUDIT_ARCH_AARCH64`).
    Aarch64,
}

impl Arch {
    /// The architecture this program was built for, when the filter supports it.
    pub fn native() -> Option<Arch> {
        if cfg!(target_arch = "x86_64") {
            Some(Arch::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Arch::Aarch64)
        } else {
            None
        }
    }

    fn audit(self) -> u32 {
        match self {
            // EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
            Arch::X86_64 => 0xc000_003e,
            // EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
            Arch::Aarch64 => 0xc000_00b7,
        }
    }
}

/// The refused system calls: name, x86_64 number, aarch64 number, and why.
pub const DENIED: &[(&str, u32, u32, &str)] = &[
    ("init_module", 175, 105, "loads kernel code"),
    ("finit_module", 313, 273, "loads kernel code"),
    ("delete_module", 176, 106, "unloads kernel code"),
    ("kexec_load", 246, 104, "replaces the running kernel"),
    ("kexec_file_load", 320, 294, "replaces the running kernel"),
    ("bpf", 321, 280, "runs programs in the kernel"),
    (
        "perf_event_open",
        298,
        241,
        "kernel profiling: a frequent exploit surface and a side channel",
    ),
    ("add_key", 248, 217, "the kernel keyring is not namespaced"),
    (
        "request_key",
        249,
        218,
        "the kernel keyring is not namespaced",
    ),
    ("keyctl", 250, 219, "the kernel keyring is not namespaced"),
    (
        "mount",
        165,
        40,
        "changes what the sandbox sees (also inside a new user namespace)",
    ),
    ("umount2", 166, 39, "uncovers what the sandbox hides"),
    (
        "pivot_root",
        155,
        41,
        "changes the root of the mount namespace",
    ),
    ("open_tree", 428, 428, "the new mount API"),
    ("move_mount", 429, 429, "the new mount API"),
    ("fsopen", 430, 430, "the new mount API"),
    ("fsconfig", 431, 431, "the new mount API"),
    ("fsmount", 432, 432, "the new mount API"),
    ("fspick", 433, 433, "the new mount API"),
    ("mount_setattr", 442, 442, "the new mount API"),
    ("swapon", 167, 224, "host swap"),
    ("swapoff", 168, 225, "host swap"),
    ("reboot", 169, 142, "host power state"),
    ("acct", 163, 89, "host process accounting"),
    (
        "open_by_handle_at",
        304,
        265,
        "opens files by handle, past the mount namespace",
    ),
    (
        "userfaultfd",
        323,
        282,
        "stalls the kernel at will: a common exploit primitive",
    ),
    ("syslog", 103, 116, "the host's kernel log"),
    ("quotactl", 179, 60, "host disk quotas"),
    ("settimeofday", 164, 170, "the host clock"),
    ("clock_settime", 227, 112, "the host clock"),
    ("adjtimex", 159, 171, "the host clock"),
    ("clock_adjtime", 305, 266, "the host clock"),
];

/// `BPF_LD | BPF_W | BPF_ABS`
const LD_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`
const JEQ: u16 = 0x15;
/// `BPF_JMP | BPF_JGE | BPF_K`
const JGE: u16 = 0x35;
/// `BPF_RET | BPF_K`
const RET: u16 = 0x06;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
/// The x32 ABI marks its system call numbers with this bit.
const X32_BIT: u32 = 0x4000_0000;

/// One instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset when true.
    pub jt: u8,
    /// Jump offset when false.
    pub jf: u8,
    /// Operand.
    pub k: u32,
}

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

/// The filter for `arch` (pure): refuse another ABI, refuse each of [`DENIED`] with
/// `EPERM`, allow the rest.
pub fn program(arch: Arch) -> Vec<Insn> {
    let eperm = RET_ERRNO | libc::EPERM as u32;
    let nrs: Vec<u32> = DENIED
        .iter()
        .map(|(_, x, a, _)| match arch {
            Arch::X86_64 => *x,
            Arch::Aarch64 => *a,
        })
        .collect();
    let mut p = vec![
        // seccomp_data.arch
        insn(LD_ABS, 0, 0, 4),
        insn(JEQ, 1, 0, arch.audit()),
        insn(RET, 0, 0, eperm),
        // seccomp_data.nr
        insn(LD_ABS, 0, 0, 0),
    ];
    if arch == Arch::X86_64 {
        p.push(insn(JGE, 0, 1, X32_BIT));
        p.push(insn(RET, 0, 0, eperm));
    }
    let n = nrs.len();
    for (i, nr) in nrs.iter().enumerate() {
        // Past the remaining comparisons and the ALLOW: to the refusal.
        let to_deny = u8::try_from(n - i).expect("the deny list fits a jump");
        p.push(insn(JEQ, to_deny, 0, *nr));
    }
    p.push(insn(RET, 0, 0, RET_ALLOW));
    p.push(insn(RET, 0, 0, eperm));
    p
}

/// What the kernel would answer for system call `nr` made through ABI `audit_arch` (a
/// reference interpreter of the programs [`program`] makes, for the tests).
pub fn run(p: &[Insn], audit_arch: u32, nr: u32) -> u32 {
    let mut acc = 0u32;
    let mut pc = 0usize;
    loop {
        let i = p[pc];
        match i.code {
            LD_ABS => {
                acc = match i.k {
                    0 => nr,
                    4 => audit_arch,
                    other => panic!("load of offset {other}"),
                };
                pc += 1;
            }
            JEQ | JGE => {
                let taken = if i.code == JEQ {
                    acc == i.k
                } else {
                    acc >= i.k
                };
                pc += 1 + usize::from(if taken { i.jt } else { i.jf });
            }
            RET => return i.k,
            other => panic!("opcode {other:#x}"),
        }
    }
}

/// The program as the bytes bubblewrap reads (`struct sock_filter` array, native endian).
pub fn bytes(p: &[Insn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(p.len() * 8);
    for i in p {
        out.extend(i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend(i.k.to_ne_bytes());
    }
    out
}

/// A sealed in-memory file holding this architecture's program, at offset 0, for
/// `bwrap --seccomp FD`; `None` on an architecture the filter does not know.
pub fn memfd() -> Result<Option<OwnedFd>, String> {
    let Some(arch) = Arch::native() else {
        return Ok(None);
    };
    let data = bytes(&program(arch));
    // SAFETY: a NUL-terminated name and flags; the result is checked.
    let fd = unsafe { libc::memfd_create(c"akbench-seccomp".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!(
            "memfd_create failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fd is a fresh descriptor this function owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut f = std::fs::File::from(owned);
    use std::io::{Seek, Write};
    f.write_all(&data)
        .and_then(|()| f.rewind())
        .map_err(|e| format!("cannot write the seccomp program: {e}"))?;
    Ok(Some(OwnedFd::from(f)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;

    #[test]
    fn every_denied_call_is_refused_and_the_rest_allowed_on_both_architectures() {
        for arch in [Arch::X86_64, Arch::Aarch64] {
            let p = program(arch);
            for (name, x, a, _) in DENIED {
                let nr = if arch == Arch::X86_64 { *x } else { *a };
                assert_eq!(run(&p, arch.audit(), nr), EPERM, "{arch:?} {name}");
            }
            // read, write, openat, clone, execve, exit_group
            let allowed: &[u32] = match arch {
                Arch::X86_64 => &[0, 1, 257, 56, 59, 231],
                Arch::Aarch64 => &[63, 64, 56, 220, 221, 94],
            };
            for nr in allowed {
                assert_eq!(run(&p, arch.audit(), *nr), RET_ALLOW, "{arch:?} {nr}");
            }
            // Another ABI is refused whatever the number.
            assert_eq!(run(&p, 0x4000_0003, 0), EPERM, "{arch:?} i386");
        }
        // x32 numbers are refused on x86_64.
        let p = program(Arch::X86_64);
        assert_eq!(run(&p, Arch::X86_64.audit(), X32_BIT | 1), EPERM);
        assert_eq!(bytes(&p).len(), p.len() * 8);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_x86_64_numbers_are_the_kernels() {
        let libc_nr: &[(&str, i64)] = &[
            ("init_module", libc::SYS_init_module),
            ("finit_module", libc::SYS_finit_module),
            ("delete_module", libc::SYS_delete_module),
            ("kexec_load", libc::SYS_kexec_load),
            ("kexec_file_load", libc::SYS_kexec_file_load),
            ("bpf", libc::SYS_bpf),
            ("perf_event_open", libc::SYS_perf_event_open),
            ("add_key", libc::SYS_add_key),
            ("request_key", libc::SYS_request_key),
            ("keyctl", libc::SYS_keyctl),
            ("mount", libc::SYS_mount),
            ("umount2", libc::SYS_umount2),
            ("pivot_root", libc::SYS_pivot_root),
            ("open_tree", libc::SYS_open_tree),
            ("move_mount", libc::SYS_move_mount),
            ("fsopen", libc::SYS_fsopen),
            ("fsconfig", libc::SYS_fsconfig),
            ("fsmount", libc::SYS_fsmount),
            ("fspick", libc::SYS_fspick),
            ("mount_setattr", libc::SYS_mount_setattr),
            ("swapon", libc::SYS_swapon),
            ("swapoff", libc::SYS_swapoff),
            ("reboot", libc::SYS_reboot),
            ("acct", libc::SYS_acct),
            ("open_by_handle_at", libc::SYS_open_by_handle_at),
            ("userfaultfd", libc::SYS_userfaultfd),
            ("syslog", libc::SYS_syslog),
            ("quotactl", libc::SYS_quotactl),
            ("settimeofday", libc::SYS_settimeofday),
            ("clock_settime", libc::SYS_clock_settime),
            ("adjtimex", libc::SYS_adjtimex),
            ("clock_adjtime", libc::SYS_clock_adjtime),
        ];
        assert_eq!(libc_nr.len(), DENIED.len());
        for ((name, nr), (dname, x, _, _)) in libc_nr.iter().zip(DENIED) {
            assert_eq!(name, dname);
            assert_eq!(i64::from(*x), *nr, "{name}");
        }
    }
}
