"""Run a command the way Docker (and a Kubernetes pod with the RuntimeDefault profile) runs a
container's process, as far as one machine can without Docker: as root, under a seccomp
filter shaped like Docker's default profile, with only Docker's default capabilities.

    /usr/bin/python3 e2e/docker_like.py [--check] -- COMMAND ARGS...

The filter is built with libseccomp's Python binding (Debian's python3-seccomp) and loaded
before exec, without no_new_privs (Docker loads it while it still holds CAP_SYS_ADMIN):
  default action ERRNO(EPERM); the allow list of Docker's default profile (moby's
  profiles/seccomp/default.json) for a container without CAP_SYS_ADMIN: so no unshare,
  setns, mount, umount, pivot_root, bpf, perf_event_open...; clone only without CLONE_NEW*
  flags; clone3 answers ENOSYS; socket of every family but AF_VSOCK; personality only with
  the values Docker allows; chroot allowed (CAP_SYS_CHROOT is a default capability).
Then setpriv (util-linux) drops every capability outside Docker's default set from the
bounding set before it execs COMMAND (a root process keeps exactly those).

What it does not emulate: the container's own mount, PID and network namespaces, cgroups,
AppArmor, and /proc masking; the command sees this machine's file system and processes.
`--check` prints the capability and seccomp lines of /proc/self/status and whether a user
namespace can be made, then runs COMMAND.
"""
import errno
import os
import sys

DOCKER_CAPS = ("chown", "dac_override", "fsetid", "fowner", "mknod", "net_raw", "setgid", "setuid", "setfcap",
               "setpcap", "net_bind_service", "sys_chroot", "kill", "audit_write")

ALLOW = """accept accept4 access adjtimex alarm bind brk capget capset chdir chmod chown chown32 clock_adjtime
clock_adjtime64 clock_getres clock_getres_time64 clock_gettime clock_gettime64 clock_nanosleep
clock_nanosleep_time64 close close_range connect copy_file_range creat dup dup2 dup3 epoll_create epoll_create1
epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2 epoll_wait epoll_wait_old eventfd eventfd2 execve execveat exit
exit_group faccessat faccessat2 fadvise64 fadvise64_64 fallocate fanotify_mark fchdir fchmod fchmodat fchown
fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr flistxattr flock fork fremovexattr fsetxattr fstat fstat64
fstatat64 fstatfs fstatfs64 fsync ftruncate ftruncate64 futex futex_time64 futex_waitv futimesat getcpu getcwd
getdents getdents64 getegid getegid32 geteuid geteuid32 getgid getgid32 getgroups getgroups32 getitimer
getpeername getpgid getpgrp getpid getppid getpriority getrandom getresgid getresgid32 getresuid getresuid32
getrlimit get_robust_list getrusage getsid getsockname getsockopt get_thread_area gettid gettimeofday getuid
getuid32 getxattr inotify_add_watch inotify_init inotify_init1 inotify_rm_watch io_cancel ioctl io_destroy
io_getevents io_pgetevents io_pgetevents_time64 ioprio_get ioprio_set io_setup io_submit io_uring_enter
io_uring_register io_uring_setup ipc kill landlock_add_rule landlock_create_ruleset landlock_restrict_self lchown
lchown32 lgetxattr link linkat listen listxattr llistxattr _llseek lremovexattr lseek lsetxattr lstat lstat64
madvise membarrier memfd_create memfd_secret mincore mkdir mkdirat mknod mknodat mlock mlock2 mlockall mmap mmap2
mprotect mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedreceive_time64 mq_timedsend
mq_timedsend_time64 mq_unlink mremap msgctl msgget msgrcv msgsnd msync munlock munlockall munmap
name_to_handle_at nanosleep newfstatat _newselect open openat openat2 pause pidfd_open pidfd_send_signal pipe
pipe2 pkey_alloc pkey_free pkey_mprotect poll ppoll ppoll_time64 prctl pread64 preadv preadv2 prlimit64
process_mrelease pselect6 pselect6_time64 pwrite64 pwritev pwritev2 read readahead readlink readlinkat readv
recv recvfrom recvmmsg recvmmsg_time64 recvmsg remap_file_pages removexattr rename renameat renameat2
restart_syscall rmdir rseq rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend
rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo sched_getaffinity sched_getattr sched_getparam
sched_get_priority_max sched_get_priority_min sched_getscheduler sched_rr_get_interval
sched_rr_get_interval_time64 sched_setaffinity sched_setattr sched_setparam sched_setscheduler sched_yield
seccomp select semctl semget semop semtimedop semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg sendto
setfsgid setfsgid32 setfsuid setfsuid32 setgid setgid32 setgroups setgroups32 setitimer setpgid setpriority
setregid setregid32 setresgid setresgid32 setresuid setresuid32 setreuid setreuid32 setrlimit set_robust_list
setsid setsockopt set_thread_area set_tid_address setuid setuid32 setxattr shmat shmctl shmdt shmget shutdown
sigaltstack signalfd signalfd4 sigprocmask sigreturn socketcall socketpair splice stat stat64 statfs statfs64
statx symlink symlinkat sync sync_file_range syncfs sysinfo tee tgkill time timer_create timer_delete
timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64 timerfd_create timerfd_gettime
timerfd_gettime64 timerfd_settime timerfd_settime64 times tkill truncate truncate64 ugetrlimit umask uname unlink
unlinkat utime utimensat utimensat_time64 utimes vfork vmsplice wait4 waitid waitpid write writev
process_vm_readv process_vm_writev ptrace arch_prctl modify_ldt chroot""".split()

CLONE_NEW_MASK = 0x7E020000   # Docker's 2114060288
AF_VSOCK = 40


def build_filter():
    import seccomp
    f = seccomp.SyscallFilter(defaction=seccomp.ERRNO(errno.EPERM))
    f.set_attr(seccomp.Attr.CTL_NNP, 0)          # no no_new_privs: the filter is loaded with CAP_SYS_ADMIN
    for name in ALLOW:
        try:
            f.add_rule(seccomp.ALLOW, name)
        except (RuntimeError, ValueError, OSError):
            pass                                  # not a syscall of this architecture
    f.add_rule(seccomp.ALLOW, "socket", seccomp.Arg(0, seccomp.NE, AF_VSOCK))
    for value in (0, 8, 131072, 131080, 4294967295):
        f.add_rule(seccomp.ALLOW, "personality", seccomp.Arg(0, seccomp.EQ, value))
    f.add_rule(seccomp.ALLOW, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEW_MASK, 0))
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    return f


def main(argv):
    check = False
    if argv[:1] == ["--check"]:
        check, argv = True, argv[1:]
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    cmd = argv[argv.index("--") + 1:]
    if os.geteuid() != 0:
        print("docker_like.py runs as root (a container's process is root)", file=sys.stderr)
        return 2
    try:
        f = build_filter()
    except ImportError:
        print("docker_like.py needs libseccomp's Python binding: apt-get install python3-seccomp", file=sys.stderr)
        return 3
    f.load()
    caps = "-all," + ",".join("+" + c for c in DOCKER_CAPS)
    wrapped = ["setpriv", f"--bounding-set={caps}", "--inh-caps=-all", "--"]
    if check:
        probe = ("grep -E '^(Cap(Eff|Bnd)|Seccomp|NoNewPrivs):' /proc/self/status; "
                 "if unshare --user true 2>/dev/null; then echo USERNS_ALLOWED; else echo USERNS_REFUSED; fi; "
                 'exec "$@"')
        wrapped += ["/bin/sh", "-c", probe, "sh"]
    os.execvp("setpriv", wrapped + cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
