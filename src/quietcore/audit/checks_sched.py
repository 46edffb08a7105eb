"""Scheduler: preemption model, RT throttling, tick rate."""

from __future__ import annotations

from quietcore.audit.context import AuditContext
from quietcore.audit.finding import Finding, Status
from quietcore.facts import kernel

# Kernel config options for each model, most specific first.
_CONFIG_MODELS = (
    ("CONFIG_PREEMPT_RT", "rt"),
    ("CONFIG_PREEMPT_LAZY", "lazy"),
    ("CONFIG_PREEMPT", "full"),
    ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
    ("CONFIG_PREEMPT_NONE", "none"),
)
DEBUGFS = "sys/kernel/debug/sched/preempt"


def preempt(ctx: AuditContext) -> Finding:
    """The model and the source that decided it: debugfs (the running mode),
    then preempt= (the boot choice on PREEMPT_DYNAMIC), then uname -v, then
    the kernel config's default."""
    config, source = ctx.config
    built = kernel.preempt_from_version(ctx.version)
    dynamic = built == "PREEMPT_DYNAMIC" or config.get("CONFIG_PREEMPT_DYNAMIC") == "y"
    f = Finding("sched.preempt", Status.INFO, "")
    f.see("/proc/sys/kernel/version", ctx.version or "unreadable")
    mode, why = kernel.preempt_dynamic_mode(ctx.root), ctx.root.read(DEBUGFS)[1]
    param = ctx.cmdline.get("preempt")
    from_config = next((model for option, model in _CONFIG_MODELS if config.get(option) == "y"), None)
    if built == "PREEMPT_RT" or config.get("CONFIG_PREEMPT_RT") == "y":
        model, decided = "rt", "uname -v (PREEMPT_RT)" if built == "PREEMPT_RT" else source
    elif mode:
        model, decided = mode, f"/{DEBUGFS}"
        f.see(f"/{DEBUGFS}", ctx.root.read_line(DEBUGFS))
    elif dynamic and param:
        model, decided = param, "/proc/cmdline preempt="
    elif from_config:
        model, decided = from_config, f"{source} ({'default of PREEMPT_DYNAMIC' if dynamic else 'built in'})"
    elif built == "PREEMPT":
        model, decided = "full", "uname -v (PREEMPT)"
    else:
        f.status = Status.UNKNOWN
        f.summary = "preemption model unknown: no debugfs, preempt=, uname -v mark or kernel config"
        f.see(f"/{DEBUGFS}", why or "missing")
        f.act("command", "mount -t debugfs none /sys/kernel/debug", note="then audit again as root")
        return f
    kind = "dynamic (switchable at boot with preempt= or at run time in debugfs)" if dynamic else "built in"
    f.summary = f"preemption model: {model}, {kind}; decided by {decided}"
    if param is not None:
        f.see("/proc/cmdline", f"preempt={param}")
    if source:
        f.see(source, ", ".join(f"{o}={config[o]}" for o, _ in _CONFIG_MODELS if o in config))
    if dynamic and not mode:
        f.see(f"/{DEBUGFS}", why or "missing")
        f.act("command", f"mount -t debugfs none /sys/kernel/debug; cat /{DEBUGFS}", note="to read the running mode")
    return f


def rt_throttling(ctx: AuditContext) -> Finding:
    runtime = ctx.root.read_line("proc/sys/kernel/sched_rt_runtime_us")
    period = ctx.root.read_line("proc/sys/kernel/sched_rt_period_us")
    if runtime is None or period is None:
        f = Finding("sched.rt_throttling", Status.UNKNOWN, "RT throttling settings not readable")
        return f.see("/proc/sys/kernel/sched_rt_runtime_us", ctx.root.read("proc/sys/kernel/sched_rt_runtime_us")[1])
    f = Finding("sched.rt_throttling", Status.OK, "")
    f.see("/proc/sys/kernel/sched_rt_runtime_us", runtime).see("/proc/sys/kernel/sched_rt_period_us", period)
    try:
        run_us, period_us = int(runtime), int(period)
    except ValueError:
        f.status, f.summary = Status.UNKNOWN, f"cannot parse {runtime!r}/{period!r}"
        return f
    if run_us < 0:
        f.status = Status.WARN
        f.summary = "RT throttling is off: a runaway real-time task can starve its CPU for good"
        f.act("sysctl", "kernel.sched_rt_runtime_us", "950000", note="the default, unless RT tasks own isolated CPUs")
    else:
        # The safe default, and no noise to ordinary work: only a real-time task that runs a whole period
        # (a SCHED_FIFO probe, a polling RT thread) meets it. Information, not OK beside a sentence of noise.
        gap_ms = (period_us - run_us) / 1000
        f.status = Status.INFO
        f.summary = (f"RT tasks are throttled after {run_us / 1000:g} ms per {period_us / 1000:g} ms (the safe "
                     f"default): only a real-time task that spins that long, such as a SCHED_FIFO probe, is stopped "
                     f"for {gap_ms:g} ms every period")  # fmt: skip
    return f


def hz(ctx: AuditContext) -> Finding:
    config, source = ctx.config
    value = config.get("CONFIG_HZ")
    if not value:
        f = Finding("sched.hz", Status.UNKNOWN, "CONFIG_HZ unknown: no kernel config found")
        f.see("/proc/config.gz", "missing").see(*ctx.boot_config)
        f.act("kernel-config", "CONFIG_IKCONFIG_PROC", "y", ("reboot",), "or install /boot/config-$(uname -r)")
        return f
    f = Finding("sched.hz", Status.INFO, f"the tick runs at {value} Hz ({1000 / int(value):g} ms) on CPUs with a tick")
    f.see(source or "kernel config", f"CONFIG_HZ={value}")
    ticking = ctx.targets - ctx.nohz_full
    if ticking:
        f.summary += f"; target CPUs {len(ticking)} of {len(ctx.targets)} keep it (not nohz_full)"
    return f
