/* Thin wrappers over DPDK's inline functions (rx/tx bursts, mbuf access),
 * so the Rust side links plain symbols. Built only with the `dpdk` feature. */
#include <stdint.h>
#include <string.h>
#include <rte_eal.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_lcore.h>
#include <rte_memcpy.h>

int sl_eal_init(int argc, char **argv) { return rte_eal_init(argc, argv); }
int sl_dev_probe(const char *devargs) { return rte_dev_probe(devargs); }
int sl_port_by_name(const char *name, uint16_t *port) { return rte_eth_dev_get_port_by_name(name, port); }

struct rte_mempool *sl_pool_create(const char *name, unsigned n) {
    return rte_pktmbuf_pool_create(name, n, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
}

int sl_port_start(uint16_t port, struct rte_mempool *mp, uint16_t nb_desc) {
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    int rc = rte_eth_dev_configure(port, 1, 1, &conf);
    if (rc < 0) return rc;
    uint16_t rxd = nb_desc, txd = nb_desc;
    rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
    int sock = rte_eth_dev_socket_id(port);
    rc = rte_eth_rx_queue_setup(port, 0, rxd, sock < 0 ? 0 : (unsigned)sock, NULL, mp);
    if (rc < 0) return rc;
    rc = rte_eth_tx_queue_setup(port, 0, txd, sock < 0 ? 0 : (unsigned)sock, NULL);
    if (rc < 0) return rc;
    rc = rte_eth_dev_start(port);
    if (rc < 0) return rc;
    rte_eth_promiscuous_enable(port); /* not every PMD has it */
    return 0;
}

void sl_port_stop(uint16_t port) { rte_eth_dev_stop(port); rte_eth_dev_close(port); }
/* ipackets, opackets, imissed, ierrors, oerrors, rx_nombuf */
int sl_stats(uint16_t port, uint64_t out[6]) {
    struct rte_eth_stats s;
    int rc = rte_eth_stats_get(port, &s);
    if (rc < 0) return rc;
    out[0] = s.ipackets; out[1] = s.opackets; out[2] = s.imissed;
    out[3] = s.ierrors; out[4] = s.oerrors; out[5] = s.rx_nombuf;
    return 0;
}

/* One call per rx burst: receive up to n mbufs and copy each single-segment
 * frame of at most cap bytes into dst[i] (lens[i] = its length, or 0 when it
 * did not fit / was chained: the caller counts those); RSS hashes into
 * hash[i] with has_hash[i]. The mbufs are freed here. Returns how many came. */
uint16_t sl_rx_copy(uint16_t port, uint8_t *const *dst, uint32_t cap, uint32_t *lens,
                    uint32_t *hash, uint8_t *has_hash, uint16_t n) {
    struct rte_mbuf *m[64];
    if (n > 64) n = 64;
    uint16_t got = rte_eth_rx_burst(port, 0, m, n);
    for (uint16_t i = 0; i < got; i++) {
        uint32_t len = rte_pktmbuf_pkt_len(m[i]);
        if (m[i]->nb_segs != 1 || len > cap) {
            lens[i] = 0;
        } else {
            rte_memcpy(dst[i], rte_pktmbuf_mtod(m[i], const uint8_t *), len);
            lens[i] = len;
        }
        has_hash[i] = (m[i]->ol_flags & RTE_MBUF_F_RX_RSS_HASH) != 0;
        hash[i] = m[i]->hash.rss;
    }
    if (got) rte_pktmbuf_free_bulk(m, got);
    return got;
}

/* One call per tx batch: copy n frames into fresh mbufs and send them with
 * one rte_eth_tx_burst. Returns how many the device took (-1: no mbufs). */
int sl_tx_copy(uint16_t port, struct rte_mempool *mp, const uint8_t *const *src,
               const uint16_t *lens, uint16_t n) {
    struct rte_mbuf *m[64];
    if (n > 64) n = 64;
    if (rte_pktmbuf_alloc_bulk(mp, m, n) != 0) return -1;
    for (uint16_t i = 0; i < n; i++) {
        uint8_t *d = (uint8_t *)rte_pktmbuf_append(m[i], lens[i]);
        if (d) rte_memcpy(d, src[i], lens[i]);
    }
    uint16_t sent = rte_eth_tx_burst(port, 0, m, n);
    if (sent < n) rte_pktmbuf_free_bulk(m + sent, n - sent);
    return sent;
}

/* Gives the calling (non-EAL) thread an lcore id, so mempool per-lcore
 * caches serve its allocations instead of the shared ring. */
int sl_thread_register(void) { return rte_lcore_id() == LCORE_ID_ANY ? rte_thread_register() : 0; }
