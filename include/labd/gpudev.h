/* gpudev.h - one number per GPU device labd hands out, whatever its kind: a
 * whole card, a MIG compute instance of a card, or a time-sliced share of a
 * card. Every layer already speaks of GPUs as unsigned ids (box_shape.gpus,
 * the protocol's "gpus", the "0,1" text of runtime, pool and ledger rows); the
 * id says its own kind, card and instance, so the root supervisor checks and
 * binds it from its own records (the card in its pool, the instance in the
 * driver's capability files, the share within the card's configured count)
 * without a table shared with the web process.
 *
 *   whole card        id = minor                       0 .. 255      text "3"
 *   MIG instance      id = 0x10000 | minor<<8 | gi<<3 | ci           text "3/gi1/ci0"
 *   time-sliced share id = 0x20000 | minor<<8 | share                text "3/share2"
 *
 * (gi 0..31, ci 0..7, share 0..255: the driver numbers GPU instances from 1 and
 * compute instances from 0; the text form follows the driver's capability paths,
 * /proc/driver/nvidia/capabilities/gpu3/mig/gi1/ci0.) */
#ifndef LABD_GPUDEV_H
#define LABD_GPUDEV_H

#include <stdbool.h>
#include <stddef.h>

enum gpudev_kind {
	GPUDEV_WHOLE,
	GPUDEV_MIG,
	GPUDEV_SHARE,
};

#define GPUDEV_MINOR_MAX 255u
#define GPUDEV_GI_MAX 31u
#define GPUDEV_CI_MAX 7u
#define GPUDEV_SHARE_MAX 255u
#define GPUDEV_TEXT_MAX 24 /* "255/gi31/ci7", "255/share255" + NUL */

struct gpudev {
	enum gpudev_kind kind;
	unsigned minor;    /* the card: /dev/nvidia<minor> */
	unsigned gi, ci;   /* GPUDEV_MIG */
	unsigned share;    /* GPUDEV_SHARE */
};

/* The id of d; d's fields within their bounds (else 0 and false). */
bool gpudev_encode(const struct gpudev *d, unsigned *id);
/* The parts of id: false when id is no valid device id. */
bool gpudev_decode(unsigned id, struct gpudev *out);
/* The text form of id into out (GPUDEV_TEXT_MAX bytes); "?" for an invalid id. */
void gpudev_format(unsigned id, char *out, size_t len);
/* Parses the text form ("3", "3/gi1/ci0", "3/share2"): 0 and *id, or -EINVAL. */
int gpudev_parse(const char *text, unsigned *id);
/* The card an id lives on (its minor); the id itself for a whole card. */
unsigned gpudev_minor(unsigned id);
/* Whether two devices cannot be held at once by different holders: the same id,
 * or a whole card and anything on that card. (Two MIG instances or two shares
 * of one card are independent; a MIG instance and a share of one card never
 * coexist: a card with MIG on has no shares.) */
bool gpudev_conflict(unsigned a, unsigned b);

#endif
