/* netpath.h - [network] path = auto settled once: the veth path where the host
 * forwards sandboxes' packets, else pasta (docs/sandbox.md, "Network").
 *
 * The veth path hands a sandbox's packets to the host's forward hook, where a
 * firewall whose forward policy drops them (Docker, ufw, firewalld, an admin's
 * own) would cut every veth sandbox off silently; pasta sends them from a process
 * of the host instead, which no forward chain sees. labd's own rules only narrow
 * what passes, so auto never opens such a firewall: it takes pasta. The same
 * reading answers `labd doctor` ("network path", "forwarding (veth path)"). */
#ifndef LABD_SUPERVISOR_NETPATH_H
#define LABD_SUPERVISOR_NETPATH_H

#include <stdbool.h>
#include <stddef.h>

struct labd_config;

/* What stops the host forwarding, read from the host's network namespace: nft's
 * chains (every family, iptables-nft's tables among them: `nft -j list chains`),
 * the tables of the legacy iptables and whether firewalld runs. */
struct netpath_host {
	const char *nft_chains;     /* nft's JSON; NULL when nft could not be asked */
	const char *legacy_tables;  /* /proc/net/ip_tables_names; NULL or "" = none */
	bool firewalld;             /* a process named firewalld runs */
};

/* True when something on host h drops or rejects forwarded packets, named in why
 * (as "chain ip filter/FORWARD drops forwarded packets by default"); false with
 * why "" when the host forwards. Pure: unit-tested on rulesets. */
bool netpath_blocked(const struct netpath_host *h, char *why, size_t len);

/* The same for this host, asked with nft (cfg's [network] nft). */
bool netpath_host_blocked(const struct labd_config *cfg, char *why, size_t len);

/* Settles cfg->net_path: auto becomes SANDBOX_NET_VETH or SANDBOX_NET_PASTA by
 * netpath_host_blocked; cfg->net_path_why says which and why ("auto: ..."), or
 * that the config set it. Call once as root, before the supervisor and the web
 * process read cfg (both inherit it), and for `labd doctor`. */
void netpath_settle(struct labd_config *cfg);

/* "pasta" or "veth": cfg->net_path once settled. */
const char *netpath_name(const struct labd_config *cfg);

#endif
