// What the OS takes from each CPU, added up in the kernel, for `quietcore watch`.
//
// On every CPU, each stretch of time is charged to what ran: a task (by pid, with its cgroups, so that
// user space can tell a job's own threads from the rest), or an interrupt context (a device IRQ, a
// softirq, an interrupt vector, a cross-CPU function call, a timer, a work item), net of what nested
// inside it. The sums are per CPU (a per-CPU map: no CPU waits for another) and only ever grow: user
// space reads them once a look and takes the difference, so a read races with nothing.
//
// Built with clang -target bpf; loaded by libbpf, which relocates the few kernel fields read here against
// the running kernel's BTF (CO-RE): no kernel headers are needed where it runs.

// The few of the kernel's UAPI types used here, so that the build needs no kernel headers of any arch.
typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
enum bpf_map_type { BPF_MAP_TYPE_PERCPU_ARRAY = 6, BPF_MAP_TYPE_LRU_HASH = 9, BPF_MAP_TYPE_LRU_PERCPU_HASH = 10 };
enum { BPF_ANY = 0, BPF_NOEXIST = 1 };
struct bpf_raw_tracepoint_args {
	__u64 args[0];
};

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// The kernel's types, as far as they are read here (libbpf finds the real offsets).
struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));
struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));
struct cgroup_subsys_state {
	struct cgroup *cgroup;
} __attribute__((preserve_access_index));
struct css_set {
	struct cgroup_subsys_state *subsys[1];
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));
struct task_struct {
	int pid;
	char comm[16];
	struct css_set *cgroups;
} __attribute__((preserve_access_index));
struct work_struct {
	void *func;
} __attribute__((preserve_access_index));
struct hrtimer {
	void *function;
} __attribute__((preserve_access_index));
struct timer_list {
	void *function;
} __attribute__((preserve_access_index));
struct irqaction {
	void *handler;
} __attribute__((preserve_access_index));
enum cgroup_subsys_id { cpuset_cgrp_id = 0 };

// What ran, as user space reads it (watch/bpf.py keeps the same numbers).
enum kind { TASK = 1, IRQ = 2, SOFTIRQ = 3, VECTOR = 4, WORK = 5, TIMER = 6, CALL = 7 };
enum vector { LOCAL_TIMER, RESCHEDULE, CALL_FUNCTION, CALL_FUNCTION_SINGLE, IRQ_WORK, THERMAL_APIC, PLATFORM_IPI };

struct key {
	__u32 kind;
	__u32 pad;
	__u64 id;     // a pid, an IRQ, a softirq's or a vector's number, a function's address
	__u64 cpuset; // a task's cpuset cgroup (cgroup v1's kernfs id), else 0
	__u64 cgroup; // a task's cgroup v2 (the unified hierarchy's kernfs id), else 0
};
struct sum {
	__u64 ns;
	__u64 count;
	__u64 longest;
};
#define DEPTH 8
struct frame {
	__u32 kind;
	__u32 pad;
	__u64 id;
	__u64 start;
	__u64 inner; // time of what nested inside it
};
struct cpu {
	__u64 since;  // when the task now running was switched in (0: not yet seen)
	__u64 nested; // time of interrupts and work items inside its slice
	__u32 depth;
	__u32 pad;
	struct frame stack[DEPTH];
};
struct name {
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct key);
	__type(value, struct sum);
} sums SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu);
} cpus SEC(".maps");

// A task's name as it was last switched out: a task gone by the read is still named.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct name);
} names SEC(".maps");

static __always_inline struct cpu *here(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpus, &zero);
}

static __always_inline void add(__u32 kind, __u64 id, __u64 cpuset, __u64 cgroup, __u64 ns)
{
	struct key k = {.kind = kind, .id = id, .cpuset = cpuset, .cgroup = cgroup};
	struct sum *s = bpf_map_lookup_elem(&sums, &k);
	if (!s) {
		struct sum zero = {};
		bpf_map_update_elem(&sums, &k, &zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&sums, &k);
		if (!s)
			return;
	}
	s->ns += ns;
	s->count += 1;
	if (ns > s->longest)
		s->longest = ns;
}

static __always_inline void enter(__u32 kind, __u64 id)
{
	struct cpu *c = here();
	if (!c)
		return;
	__u32 d = c->depth;
	if (d >= DEPTH) // deeper than interrupts nest: an exit was lost; start again
		d = 0;
	d &= DEPTH - 1;
	c->stack[d].kind = kind;
	c->stack[d].id = id;
	c->stack[d].start = bpf_ktime_get_ns();
	c->stack[d].inner = 0;
	c->depth = d + 1;
}

// The innermost context ends: its time, net of what nested inside, is its own; all of it is its parent's
// inner time (or the task's nested time).
static __always_inline void leave(__u32 kind)
{
	struct cpu *c = here();
	if (!c)
		return;
	__u32 d = c->depth;
	if (d == 0 || d > DEPTH)
		return;
	__u32 i = (d - 1) & (DEPTH - 1);
	if (c->stack[i].kind != kind) { // an entry or exit was lost: drop the open contexts
		c->depth = 0;
		return;
	}
	__u64 now = bpf_ktime_get_ns();
	__u64 took = now - c->stack[i].start;
	__u64 inner = c->stack[i].inner;
	add(kind, c->stack[i].id, 0, 0, took > inner ? took - inner : 0);
	c->depth = i;
	if (i > 0) {
		__u32 p = (i - 1) & (DEPTH - 1); // a mask the verifier follows, where a compare is optimised away
		c->stack[p].inner += took;
	} else {
		c->nested += took;
	}
}

static __always_inline __u64 cgroup_v1(struct task_struct *t)
{
	struct css_set *set = BPF_CORE_READ(t, cgroups);
	if (!set)
		return 0;
	int at = bpf_core_enum_value(enum cgroup_subsys_id, cpuset_cgrp_id);
	struct cgroup_subsys_state *css = 0;
	bpf_core_read(&css, sizeof(css), &set->subsys[at]);
	if (!css)
		return 0;
	return BPF_CORE_READ(css, cgroup, kn, id);
}

static __always_inline __u64 cgroup_v2(struct task_struct *t)
{
	return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, _Bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct cpu *c = here();
	if (!c)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	// a work item that sleeps, or an exit lost: what is open ends here
	for (int j = DEPTH - 1; j >= 0; j--) {
		if ((__u32)j < c->depth) {
			__u64 took = now - c->stack[j].start;
			__u64 inner = c->stack[j].inner;
			add(c->stack[j].kind, c->stack[j].id, 0, 0, took > inner ? took - inner : 0);
			if (j == 0)
				c->nested += took;
		}
	}
	c->depth = 0;
	if (c->since) {
		__u64 slice = now - c->since;
		slice = slice > c->nested ? slice - c->nested : 0;
		__u32 pid = BPF_CORE_READ(prev, pid);
		add(TASK, pid, pid ? cgroup_v1(prev) : 0, pid ? cgroup_v2(prev) : 0, slice);
		if (pid) {
			struct name n = {};
			bpf_probe_read_kernel_str(n.comm, sizeof(n.comm), prev->comm);
			bpf_map_update_elem(&names, &pid, &n, BPF_ANY);
		}
	}
	c->since = now;
	c->nested = 0;
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(on_irq, int irq, struct irqaction *action)
{
	enter(IRQ, (__u64)irq);
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(on_irq_exit, int irq)
{
	leave(IRQ);
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(on_softirq, unsigned int vec)
{
	enter(SOFTIRQ, vec);
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(on_softirq_exit, unsigned int vec)
{
	leave(SOFTIRQ);
	return 0;
}

SEC("tp_btf/workqueue_execute_start")
int BPF_PROG(on_work, struct work_struct *work)
{
	enter(WORK, (__u64)BPF_CORE_READ(work, func));
	return 0;
}

SEC("tp_btf/workqueue_execute_end")
int BPF_PROG(on_work_end, struct work_struct *work)
{
	leave(WORK);
	return 0;
}

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(on_hrtimer, struct hrtimer *timer)
{
	enter(TIMER, (__u64)BPF_CORE_READ(timer, function));
	return 0;
}

SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(on_hrtimer_exit, struct hrtimer *timer)
{
	leave(TIMER);
	return 0;
}

SEC("tp_btf/timer_expire_entry")
int BPF_PROG(on_timer, struct timer_list *timer)
{
	enter(TIMER, (__u64)BPF_CORE_READ(timer, function));
	return 0;
}

SEC("tp_btf/timer_expire_exit")
int BPF_PROG(on_timer_exit, struct timer_list *timer)
{
	leave(TIMER);
	return 0;
}

// A raw tracepoint: its first argument is a function pointer, which BTF's typed access refuses to read.
SEC("raw_tp/csd_function_entry")
int on_call(struct bpf_raw_tracepoint_args *ctx)
{
	if (!ctx->args[1]) // no csd: the sender runs the function itself, not an IPI
		return 0;
	enter(CALL, ctx->args[0]);
	return 0;
}

SEC("raw_tp/csd_function_exit")
int on_call_exit(struct bpf_raw_tracepoint_args *ctx)
{
	if (!ctx->args[1])
		return 0;
	leave(CALL);
	return 0;
}

// x86's interrupt vectors: absent elsewhere, where user space does not load these
#define VECTOR_PAIR(name, code)                                   \
	SEC("tp_btf/" #name "_entry")                             \
	int BPF_PROG(on_##name, int vector)                       \
	{                                                         \
		enter(VECTOR, code);                              \
		return 0;                                         \
	}                                                         \
	SEC("tp_btf/" #name "_exit")                              \
	int BPF_PROG(on_##name##_exit, int vector)                \
	{                                                         \
		leave(VECTOR);                                    \
		return 0;                                         \
	}

VECTOR_PAIR(local_timer, LOCAL_TIMER)
VECTOR_PAIR(reschedule, RESCHEDULE)
VECTOR_PAIR(call_function, CALL_FUNCTION)
VECTOR_PAIR(call_function_single, CALL_FUNCTION_SINGLE)
VECTOR_PAIR(irq_work, IRQ_WORK)
VECTOR_PAIR(thermal_apic, THERMAL_APIC)
VECTOR_PAIR(x86_platform_ipi, PLATFORM_IPI)
