"""The container tier's own seccomp filter (a classic BPF program), built by the parent.

Where namespaces are refused (Docker's and Kubernetes' default seccomp profiles), each
graded child installs this filter itself, after it has dropped to its unprivileged uid and
before any student code runs (autograder/isolation/confine.py). It denies, with EPERM:

  * sockets of every family (socket, socketpair, connect, bind, listen, accept): no
    network, and no unix socket to another process;
  * looking into or steering other processes: ptrace, process_vm_readv/writev, kcmp,
    pidfd_getfd, process_madvise;
  * new namespaces and mounts: unshare, setns, clone with a CLONE_NEW* flag, mount and the
    new mount API, pivot_root, chroot; clone3 answers ENOSYS (its flags live in memory a
    filter cannot read, so the C library falls back to clone, which is checked);
  * kernel surfaces a grader never needs: bpf, perf_event_open, userfaultfd, io_uring (its
    operations bypass seccomp), keyrings, modules, kexec, handles, System V IPC and POSIX
    message queues (they would outlive the child), mknod, personality, quotas, swap...

fallocate answers EOPNOTSUPP: the scratch folder is on the machine's disk, and a preallocation
takes gigabytes in one call, faster than anyone can watch; the C library's posix_fallocate
then writes the zeros itself, which RLIMIT_FSIZE and the zygote's scratch watch bound.
Syscalls of another ABI (i386 `int 0x80`, x32) kill the process. Everything else is allowed:
the filter narrows what the kernel offers, the uid, the chroot and the rlimits do the rest.
Numbers are the kernel's for x86_64 and aarch64 (checked against libseccomp by the tests).
"""
from __future__ import annotations

import os

# struct seccomp_data: nr at 0, arch at 4, instruction pointer at 8, args[6] (u64) from 16
_LD_ABS = 0x20            # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15               # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35               # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45              # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06               # BPF_RET | BPF_K
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
EPERM, ENOSYS, EOPNOTSUPP = 1, 38, 95
X32_BIT = 0x40000000
CLONE_NEW_MASK = 0x7E020000   # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET

ARCHES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

SYSCALLS = {
    "x86_64": {
        "socket": 41, "socketpair": 53, "connect": 42, "bind": 49, "listen": 50, "accept": 43, "accept4": 288,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
        "process_madvise": 440, "unshare": 272, "setns": 308, "clone": 56, "clone3": 435, "mount": 165,
        "umount2": 166, "pivot_root": 155, "chroot": 161, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "open_tree": 428, "move_mount": 429, "mount_setattr": 442, "bpf": 321,
        "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 246,
        "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67,
        "semget": 64, "semop": 65, "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70,
        "msgctl": 71, "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243,
        "mq_notify": 244, "mq_getsetattr": 245, "mknod": 133, "mknodat": 259, "quotactl": 179, "acct": 163,
        "swapon": 167, "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172,
        "ioperm": 173, "syslog": 103, "vhangup": 153, "lookup_dcookie": 212, "fanotify_init": 300,
        "personality": 135, "seccomp": 317, "fallocate": 285,
    },
    "aarch64": {
        "socket": 198, "socketpair": 199, "connect": 203, "bind": 200, "listen": 201, "accept": 202, "accept4": 242,
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "pidfd_getfd": 438,
        "process_madvise": 440, "unshare": 97, "setns": 268, "clone": 220, "clone3": 435, "mount": 40,
        "umount2": 39, "pivot_root": 41, "chroot": 51, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "open_tree": 428, "move_mount": 429, "mount_setattr": 442, "bpf": 280,
        "perf_event_open": 241, "userfaultfd": 282, "keyctl": 219, "add_key": 217, "request_key": 218,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 104,
        "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "shmget": 194, "shmat": 196, "shmctl": 195,
        "shmdt": 197, "semget": 190, "semop": 193, "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189,
        "msgrcv": 188, "msgctl": 187, "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182,
        "mq_timedreceive": 183, "mq_notify": 184, "mq_getsetattr": 185, "mknodat": 33, "quotactl": 60,
        "acct": 89, "swapon": 224, "swapoff": 225, "reboot": 142, "sethostname": 161, "setdomainname": 162,
        "syslog": 116, "vhangup": 58, "lookup_dcookie": 18, "fanotify_init": 262, "personality": 92,
        "seccomp": 277, "fallocate": 47,
    },
}

# what the child may not do (EPERM), clone3 aside (ENOSYS) and clone (checked by its flags)
DENIED = (
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
    "open_tree", "move_mount", "mount_setattr",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "open_by_handle_at", "name_to_handle_at",
    "shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop",
    "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
    "mq_notify", "mq_getsetattr", "mknod", "mknodat", "quotactl", "acct", "swapon", "swapoff", "reboot",
    "sethostname", "setdomainname", "iopl", "ioperm", "syslog", "vhangup", "lookup_dcookie", "fanotify_init",
    "personality",
)


def machine() -> str:
    return os.uname().machine


def supported(arch: str | None = None) -> bool:
    return (arch or machine()) in ARCHES


def build(arch: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for `arch` (this machine's by default)."""
    arch = arch or machine()
    if arch not in ARCHES:
        raise ValueError(f"no seccomp filter for {arch!r} (only {', '.join(ARCHES)})")
    nrs = SYSCALLS[arch]
    prog: list[tuple[int, int, int, int]] = [
        (_LD_ABS, 0, 0, 4),                         # A = arch
        (_JEQ, 1, 0, ARCHES[arch]),
        (_RET, 0, 0, RET_KILL_PROCESS),             # another ABI: no way around the filter
        (_LD_ABS, 0, 0, 0),                         # A = syscall number
    ]
    if arch == "x86_64":
        prog += [(_JGE, 0, 1, X32_BIT), (_RET, 0, 0, RET_KILL_PROCESS)]
    for name in DENIED:
        if name in nrs:
            prog += [(_JEQ, 0, 1, nrs[name]), (_RET, 0, 0, RET_ERRNO | EPERM)]
    prog += [(_JEQ, 0, 1, nrs["clone3"]), (_RET, 0, 0, RET_ERRNO | ENOSYS)]
    prog += [(_JEQ, 0, 1, nrs["fallocate"]), (_RET, 0, 0, RET_ERRNO | EOPNOTSUPP)]
    prog += [
        (_JEQ, 0, 4, nrs["clone"]),
        (_LD_ABS, 0, 0, 16),                        # low 32 bits of clone's flags (x86_64 and aarch64: args[0])
        (_JSET, 0, 1, CLONE_NEW_MASK),
        (_RET, 0, 0, RET_ERRNO | EPERM),
        (_RET, 0, 0, RET_ALLOW),
    ]
    prog.append((_RET, 0, 0, RET_ALLOW))
    if len(prog) > 4096:
        raise ValueError("seccomp filter too long")
    return prog


def denied_numbers(arch: str | None = None) -> dict[str, int]:
    """name -> number of every syscall the filter refuses on `arch` (for tests and the README)."""
    nrs = SYSCALLS[arch or machine()]
    return {n: nrs[n] for n in DENIED + ("clone3", "fallocate") if n in nrs}
