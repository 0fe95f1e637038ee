// SPDX-License-Identifier: GPL-2.0
/* Egress: default deny for sandboxes, per-tenant allowlist of
 * {cidr, port, proto}. cgroup sock_addr hooks answer EPERM before a packet
 * exists; the cgroup_skb egress program catches whatever else a sandbox
 * socket sends (ping sockets, anything a hook missed). Attached to the
 * sandguard root cgroup, so processes outside it never run these. */
#include "common.bpf.h"

#define SG_AF_UNIX    1
#define SG_AF_INET    2
#define SG_AF_INET6   10
#define SG_ETH_P_IP   0x0800
#define SG_ETH_P_IPV6 0x86DD

char LICENSE[] SEC("license") = "GPL";

/* Present from 6.2; only the unix programs use it, and those are loaded
 * only where the kernel has unix sock_addr hooks (6.7+). */
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

static __always_inline bool prefix_match(const __u32 *a, const __u8 *rule_addr, __u8 prefix)
{
	const __u32 *r = (const __u32 *)rule_addr;

#pragma unroll
	for (int w = 0; w < 4; w++) {
		int bits = (int)prefix - 32 * w;
		__u32 mask;

		if (bits <= 0)
			break;
		mask = bits >= 32 ? 0xffffffff : bpf_htonl(~((1U << (32 - bits)) - 1));
		if ((a[w] ^ r[w]) & mask)
			return false;
	}
	return true;
}

/* 127.0.0.0/8 (v4-mapped) or ::1. Every sandbox has a network namespace
 * of its own, so this loopback is its own: with listeners allowed, its
 * programs talk to each other there. (The relay, the one process of a
 * sandbox in the host's namespace, connects only where the allowlist
 * says: sandbox_relay.c checks each destination itself.) */
static __always_inline bool own_loopback(const __u32 *a)
{
	if (a[0] || a[1])
		return false;
	if (a[2] == bpf_htonl(0x0000ffff))
		return (bpf_ntohl(a[3]) >> 24) == 127;
	return !a[2] && a[3] == bpf_htonl(1);
}

static __always_inline bool egress_allowed(const struct sg_policy_k *pol, const __u32 *addr,
					   __u16 port, __u8 proto)
{
	if (pol->allow_listen && proto != IPPROTO_UDP && own_loopback(addr))
		return true;
	for (int i = 0; i < SG_MAX_EGRESS; i++) {
		const struct sg_egress_rule_k *r;

		if (i >= pol->n_egress)
			break;
		r = &pol->egress[i];
		if (r->proto && r->proto != proto)
			continue;
		if (r->port && r->port != port)
			continue;
		if (prefix_match(addr, r->addr, r->prefix))
			return true;
	}
	return false;
}

/* Events carry IPv4 in the first four bytes (include/abi/events.h); policies
 * and matching use the v4-mapped IPv6 form. */
static __always_inline void copy_event_addr(struct sg_event *e, const __u32 *addr, __u16 family)
{
	__u32 *out = (__u32 *)e->net.addr;

	if (family == SG_AF_INET) {
		out[0] = addr[3];
		out[1] = out[2] = out[3] = 0;
	} else {
		__builtin_memcpy(out, addr, 16);
	}
}

/* An inet event's address part: where the call or the packet was going. */
static __always_inline void fill_inet(struct sg_event *e, const __u32 *addr, __u16 family,
				      __u16 port, __u8 proto, __u8 hook)
{
	e->net.family = family;
	e->net.port = port;
	e->net.proto = proto;
	e->net.hook = hook;
	copy_event_addr(e, addr, family);
	e->net.unix_path[0] = 0;
}

/* Common verdict for the inet hooks: 1 lets the call through, 0 makes the
 * syscall fail with EPERM. */
static __always_inline int judge_inet(__u64 cgid, const struct sg_sandbox *sb, const __u32 *addr,
				      __u16 family, __u16 port, __u8 proto, __u8 hook)
{
	struct sg_policy_k *pol = sg_policy(sb->tenant);
	struct sg_event *e;
	__u8 action;

	if (pol && egress_allowed(pol, addr, port, proto))
		return 1;
	e = sg_deny_report(cgid, sb, pol, SG_RULE_EGRESS, SG_EV_EGRESS_DENIED, &action);
	if (e) {
		sg_event_current(e);
		fill_inet(e, addr, family, port, proto, hook);
		sg_event_submit(e);
	}
	return action == SG_POLICY_LOG ? 1 : 0;
}

static __always_inline int inet4(struct bpf_sock_addr *ctx, __u8 hook)
{
	struct sg_sandbox *sb;
	__u64 cgid;
	__u32 addr[4];

	sb = sg_sock_sandbox(&cgid);
	if (!sb)
		return 1;
	addr[0] = 0;
	addr[1] = 0;
	addr[2] = bpf_htonl(0x0000ffff);
	addr[3] = ctx->user_ip4;
	return judge_inet(cgid, sb, addr, SG_AF_INET, bpf_ntohs(ctx->user_port), ctx->protocol,
			  hook);
}

static __always_inline int inet6(struct bpf_sock_addr *ctx, __u8 hook)
{
	struct sg_sandbox *sb;
	__u64 cgid;
	__u32 addr[4];

	sb = sg_sock_sandbox(&cgid);
	if (!sb)
		return 1;
	addr[0] = ctx->user_ip6[0];
	addr[1] = ctx->user_ip6[1];
	addr[2] = ctx->user_ip6[2];
	addr[3] = ctx->user_ip6[3];
	return judge_inet(cgid, sb, addr, SG_AF_INET6, bpf_ntohs(ctx->user_port), ctx->protocol,
			  hook);
}

SEC("cgroup/connect4")
int sg_connect4(struct bpf_sock_addr *ctx)
{
	return inet4(ctx, SG_HOOK_CONNECT4);
}

SEC("cgroup/connect6")
int sg_connect6(struct bpf_sock_addr *ctx)
{
	return inet6(ctx, SG_HOOK_CONNECT6);
}

SEC("cgroup/sendmsg4")
int sg_sendmsg4(struct bpf_sock_addr *ctx)
{
	return inet4(ctx, SG_HOOK_SENDMSG4);
}

SEC("cgroup/sendmsg6")
int sg_sendmsg6(struct bpf_sock_addr *ctx)
{
	return inet6(ctx, SG_HOOK_SENDMSG6);
}

/* The unix hooks' common judgement: whether the tenant's policy allows
 * unix sockets. If it does not, the refusal is reported and *e is its
 * event (NULL: none goes out) with the address part begun; the caller
 * says who did it, copies the name and submits it. */
static __always_inline bool unix_allowed(__u64 cgid, const struct sg_sandbox *sb, __u8 hook,
					 struct sg_event **e, __u8 *action)
{
	struct sg_policy_k *pol = sg_policy(sb->tenant);

	if (pol && pol->allow_unix)
		return true;
	*e = sg_deny_report(cgid, sb, pol, SG_RULE_EGRESS, SG_EV_EGRESS_DENIED, action);
	if (*e) {
		__builtin_memset(&(*e)->net, 0, sizeof((*e)->net));
		(*e)->net.family = SG_AF_UNIX;
		(*e)->net.hook = hook;
	}
	return false;
}

/* How many bytes of a unix address's name an event keeps: `len` counts
 * sun_family (2 bytes) and the name; an abstract name starts with a NUL. */
static __always_inline __u32 unix_name_len(__u32 len)
{
	const __u32 room = sizeof(((struct sg_event *)0)->net.unix_path);

	len = len > 2 ? len - 2 : 0;
	return len > room ? room : len;
}

/* Unix sockets: named and abstract. libbpf 1.1 has no section name for
 * these hooks, so they sit under cgroup/connect4 and the loader sets the
 * attach type (BPF_CGROUP_UNIX_CONNECT / _SENDMSG) by number. */
static __always_inline int judge_unix(struct bpf_sock_addr *ctx, __u8 hook)
{
	struct bpf_sock_addr_kern *kctx;
	struct sg_sandbox *sb;
	struct sg_event *e = NULL;
	__u64 cgid;
	__u8 action;

	sb = sg_sock_sandbox(&cgid);
	if (!sb || unix_allowed(cgid, sb, hook, &e, &action))
		return 1;
	if (e) {
		sg_event_current(e);
		if (bpf_cast_to_kern_ctx) {
			struct sockaddr_un *sun;
			__u32 len = sizeof(e->net.unix_path);

			kctx = bpf_cast_to_kern_ctx(ctx);
			sun = (struct sockaddr_un *)BPF_CORE_READ(kctx, uaddr);
			/* Only the address the caller passed: no stale bytes past it. */
			if (bpf_core_field_exists(kctx->uaddrlen))
				len = unix_name_len(BPF_CORE_READ(kctx, uaddrlen));
			if (len)
				bpf_probe_read_kernel(e->net.unix_path, len, sun->sun_path);
		}
		sg_event_submit(e);
	}
	return action == SG_POLICY_LOG ? 1 : 0;
}

SEC("cgroup/connect4")
int sg_connect_unix(struct bpf_sock_addr *ctx)
{
	return judge_unix(ctx, SG_HOOK_CONNECT_UNIX);
}

SEC("cgroup/connect4")
int sg_sendmsg_unix(struct bpf_sock_addr *ctx)
{
	return judge_unix(ctx, SG_HOOK_SENDMSG_UNIX);
}

/* Unix sockets in LSM mode, where the kernel has no cgroup unix hooks
 * (before 6.7): the LSM hooks see the peer the kernel resolved. A stream
 * connect always reaches a named listener; a datagram connect or send is
 * judged when its peer has a name (a path or an abstract name), so the
 * other end of a socketpair stays usable. Returns 0 or -EPERM. */
static __always_inline int judge_unix_peer(struct sock *other, __u8 hook, bool named_only)
{
	struct unix_address *ua = BPF_CORE_READ((struct unix_sock *)other, addr);
	struct sg_sandbox *sb;
	struct sg_event *e = NULL;
	__u64 cgid;
	__u8 action;

	if (named_only && !ua)
		return 0;
	sb = sg_current_sandbox(&cgid);
	if (!sb || unix_allowed(cgid, sb, hook, &e, &action))
		return 0;
	if (e) {
		sg_event_task(e);
		if (ua) {
			__u32 len = unix_name_len(BPF_CORE_READ(ua, len));

			if (len)
				bpf_probe_read_kernel(e->net.unix_path, len, &ua->name[0].sun_path);
		}
		sg_event_submit(e);
	}
	return action == SG_POLICY_LOG ? 0 : -SG_EPERM;
}

SEC("lsm/unix_stream_connect")
int BPF_PROG(sg_lsm_unix_connect, struct sock *sock, struct sock *other, struct sock *newsk,
	     int ret)
{
	if (ret)
		return ret;
	return judge_unix_peer(other, SG_HOOK_LSM_UNIX_CONNECT, false);
}

SEC("lsm/unix_may_send")
int BPF_PROG(sg_lsm_unix_send, struct socket *sock, struct socket *other, int ret)
{
	if (ret)
		return ret;
	return judge_unix_peer(BPF_CORE_READ(other, sk), SG_HOOK_LSM_UNIX_SEND, true);
}

/* Binding a name (a path, or an abstract name a host service may expect
 * to own) is refused unless the policy allows unix sockets: no cgroup hook
 * sees a unix bind on any kernel. An autobind (the family alone) picks a
 * random abstract name and is allowed. */
SEC("lsm/socket_bind")
int BPF_PROG(sg_lsm_unix_bind, struct socket *sock, struct sockaddr *address, int addrlen, int ret)
{
	struct sg_sandbox *sb;
	struct sg_event *e = NULL;
	__u64 cgid;
	__u8 action;

	if (ret)
		return ret;
	if (BPF_CORE_READ(sock, sk, __sk_common.skc_family) != SG_AF_UNIX || addrlen <= 2)
		return 0;
	sb = sg_current_sandbox(&cgid);
	if (!sb || unix_allowed(cgid, sb, SG_HOOK_LSM_UNIX_BIND, &e, &action))
		return 0;
	if (e) {
		__u32 len = unix_name_len(addrlen);

		sg_event_task(e);
		if (len)
			bpf_probe_read_kernel(e->net.unix_path, len,
					      ((struct sockaddr_un *)address)->sun_path);
		sg_event_submit(e);
	}
	return action == SG_POLICY_LOG ? 0 : -SG_EPERM;
}

/* The catch-all: a packet leaving a sandbox socket to a destination the
 * allowlist does not name is dropped. Events are only sent for the first
 * few packets of a sandbox; the drop itself is always counted. */
SEC("cgroup_skb/egress")
int sg_skb_egress(struct __sk_buff *skb)
{
	struct sg_sandbox_state *st;
	struct sg_policy_k *pol;
	struct sg_sandbox *sb;
	struct sg_event *e;
	__u32 addr[4] = {};
	__u16 port = 0, family;
	__u8 proto = 0;
	__u64 cgid;
	__u8 action;

	cgid = bpf_skb_ancestor_cgroup_id(skb, sg_sandbox_level);
	sb = bpf_map_lookup_elem(&sg_sandboxes, &cgid);
	if (!sb || !sg_gen_active())
		return 1;

	if (skb->protocol == bpf_htons(SG_ETH_P_IP)) {
		struct iphdr ip;
		__u32 off;

		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)))
			return 0;
		family = SG_AF_INET;
		addr[2] = bpf_htonl(0x0000ffff);
		addr[3] = ip.daddr;
		proto = ip.protocol;
		off = (ip.ihl & 0xf) * 4;
		if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
			__u16 ports[2];
			if (!bpf_skb_load_bytes(skb, off, ports, sizeof(ports)))
				port = bpf_ntohs(ports[1]);
		}
	} else if (skb->protocol == bpf_htons(SG_ETH_P_IPV6)) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)))
			return 0;
		family = SG_AF_INET6;
		__builtin_memcpy(addr, &ip6.daddr, 16);
		proto = ip6.nexthdr;
		if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
			__u16 ports[2];
			if (!bpf_skb_load_bytes(skb, sizeof(ip6), ports, sizeof(ports)))
				port = bpf_ntohs(ports[1]);
		}
	} else {
		return 0; /* not IP: a sandbox has no business sending it */
	}

	pol = sg_policy(sb->tenant);
	if (pol && egress_allowed(pol, addr, port, proto))
		return 1;
	action = sg_action(pol, SG_RULE_EGRESS);
	if (action == SG_POLICY_LOG)
		return 1;
	sg_violation(cgid, SG_RULE_EGRESS, action == SG_POLICY_KILL);
	st = bpf_map_lookup_elem(&sg_state, &cgid);
	if (st && st->violations > 16)
		return 0;
	e = sg_event_reserve(cgid, sb, SG_EV_EGRESS_DENIED, SG_ACTION_DENIED, SG_RULE_EGRESS);
	if (e) {
		fill_inet(e, addr, family, port, proto, SG_HOOK_SKB_EGRESS);
		sg_event_submit(e);
	}
	return 0;
}
