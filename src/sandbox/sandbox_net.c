/* The sandbox's network namespace (see src/sandbox/sandbox_net.h). */
#include <errno.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "sandbox_net.h"

#define LISTEN_BACKLOG 128

/* ::ffff:0:0/96, where IPv4 rules live in the policy's 16-byte form. */
static const uint8_t v4_mapped[12] = { [10] = 0xff, [11] = 0xff };

/* The first `bits` bits of a and b are equal. */
static bool prefix_equal(const uint8_t *a, const uint8_t *b, int bits)
{
	for (int i = 0; bits > 0; i++, bits -= 8) {
		uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));
		if ((a[i] ^ b[i]) & mask)
			return false;
	}
	return true;
}

static void add_route(struct sb_net_plan *np, int family, const uint8_t *addr, int prefix)
{
	struct sb_net_route r = { .family = family, .prefix = (uint8_t)prefix };

	memcpy(r.addr, addr, family == AF_INET ? 4 : 16);
	for (int i = 0; i < np->n_routes; i++)
		if (!memcmp(&np->routes[i], &r, sizeof(r)))
			return;
	if (np->n_routes < SB_NET_MAX_ROUTES)
		np->routes[np->n_routes++] = r;
}

static void add_listen(struct sb_net_plan *np, int family, uint16_t port)
{
	for (int i = 0; i < np->n_listens; i++)
		if (np->listens[i].family == family && np->listens[i].port == port)
			return;
	if (np->n_listens < SB_NET_MAX_LISTENERS)
		np->listens[np->n_listens++] = (struct sb_net_listen){ family, port };
}

/* An IPv4 route where the rule covers IPv4 addresses (an IPv4 rule, or an
 * IPv6 one as wide as ::/0 or naming ::ffff:a.b.c.d), an IPv6 route for a
 * rule written in IPv6. */
static void routes_of(struct sb_net_plan *np, const struct sg_egress_allow *e)
{
	static const uint8_t any[16];

	if (e->prefix <= 96 && prefix_equal(e->addr, v4_mapped, e->prefix))
		add_route(np, AF_INET, any, 0);
	else if (e->prefix > 96 && !memcmp(e->addr, v4_mapped, sizeof(v4_mapped)))
		add_route(np, AF_INET, e->addr + 12, e->prefix - 96);
	if (e->family == AF_INET6)
		add_route(np, AF_INET6, e->addr, e->prefix);
}

bool sb_net_plan(struct sb_net_plan *np, const struct sg_policy *p)
{
	memset(np, 0, sizeof(*np));
	np->policy = p;
	for (int i = 0; i < p->n_egress; i++) {
		const struct sg_egress_allow *e = &p->egress[i];

		if (e->proto != 0 && e->proto != IPPROTO_TCP)
			continue; /* UDP has no relay: nothing to route */
		routes_of(np, e);
		if (e->port == 0) {
			np->any_port = true;
			continue;
		}
		add_listen(np, AF_INET, e->port);
		add_listen(np, AF_INET6, e->port);
	}
	return np->n_routes > 0;
}

static int loopback_up(int *ifindex)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;

	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) || ioctl(s, SIOCGIFINDEX, &ifr))
			err = -errno;
		else
			*ifindex = ifr.ifr_ifindex;
	} else {
		err = -errno;
	}
	close(s);
	return err;
}

static void put_attr(struct nlmsghdr *nh, unsigned short type, const void *data, size_t len)
{
	char *at = (char *)nh + NLMSG_ALIGN(nh->nlmsg_len);
	struct rtattr rta = { .rta_type = type, .rta_len = (unsigned short)RTA_LENGTH(len) };

	memcpy(at, &rta, sizeof(rta));
	memcpy(at + RTA_LENGTH(0), data, len);
	nh->nlmsg_len = NLMSG_ALIGN(nh->nlmsg_len) + RTA_ALIGN(rta.rta_len);
}

/* "ip route replace local <net> dev lo table local": every address of the
 * network is the sandbox's own, so connects to it are delivered locally. */
static int local_route(int nl, const struct sb_net_route *r, int ifindex)
{
	union {
		struct nlmsghdr nh;
		char buf[NLMSG_SPACE(sizeof(struct rtmsg)) + 64];
	} req;
	struct rtmsg rt = { .rtm_family = (unsigned char)r->family,
			    .rtm_dst_len = r->prefix,
			    .rtm_table = RT_TABLE_LOCAL,
			    .rtm_protocol = RTPROT_STATIC,
			    .rtm_scope = RT_SCOPE_HOST,
			    .rtm_type = RTN_LOCAL };
	struct {
		struct nlmsghdr nh;
		struct nlmsgerr err;
	} ack;
	ssize_t n;

	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(rt));
	req.nh.nlmsg_type = RTM_NEWROUTE;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
	memcpy(NLMSG_DATA(&req.nh), &rt, sizeof(rt));
	put_attr(&req.nh, RTA_DST, r->addr, r->family == AF_INET ? 4 : 16);
	put_attr(&req.nh, RTA_OIF, &ifindex, sizeof(ifindex));
	if (send(nl, &req, req.nh.nlmsg_len, 0) < 0)
		return -errno;
	n = recv(nl, &ack, sizeof(ack), 0);
	if (n < 0)
		return -errno;
	if (n < (ssize_t)sizeof(ack) || ack.nh.nlmsg_type != NLMSG_ERROR)
		return -EPROTO;
	return ack.err.error;
}

static int listener(int family, uint16_t port)
{
	int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1, err;
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(port) };

	if (s < 0)
		return -errno;
	if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    (family == AF_INET6 && setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one))) ||
	    (family == AF_INET ? bind(s, (struct sockaddr *)&a4, sizeof(a4))
			       : bind(s, (struct sockaddr *)&a6, sizeof(a6))) ||
	    listen(s, LISTEN_BACKLOG)) {
		err = -errno;
		close(s);
		return err;
	}
	return s;
}

int sb_net_setup(const struct sb_net_plan *np, int *fds, int *n)
{
	int ifindex = 0, nl, err;

	*n = 0;
	err = loopback_up(&ifindex);
	if (err)
		return err;
	nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (nl < 0)
		return -errno;
	for (int i = 0; np && i < np->n_routes && !err; i++) {
		err = local_route(nl, &np->routes[i], ifindex);
		/* IPv6 may be disabled on this node: then so are its rules. */
		if (err && np->routes[i].family == AF_INET6 &&
		    (err == -EAFNOSUPPORT || err == -EOPNOTSUPP || err == -EACCES))
			err = 0;
	}
	close(nl);
	for (int i = 0; np && i < np->n_listens && !err; i++) {
		int fd = listener(np->listens[i].family, np->listens[i].port);

		if (fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL)
			continue;
		if (fd < 0)
			err = fd;
		else
			fds[(*n)++] = fd;
	}
	if (err)
		while (*n > 0)
			close(fds[--*n]);
	return err;
}
