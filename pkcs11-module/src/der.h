/* A strict, bounded DER reader: one TLV at a time, single-byte tags, definite lengths in their
 * shortest form, never past the bytes it is given. What certificates /token lists are read with. */
#ifndef SVCP11_DER_H
#define SVCP11_DER_H

#include <stddef.h>

/* Bytes inside a buffer someone else owns. */
typedef struct {
  const unsigned char *p;
  size_t len;
} der_span;

typedef struct {
  unsigned char tag;
  der_span whole; /* tag, length and contents */
  der_span value; /* the contents */
} der_item;

/* DER tags the certificate walk names. */
enum {
  DER_INTEGER = 0x02,
  DER_BIT_STRING = 0x03,
  DER_OID = 0x06,
  DER_UTC_TIME = 0x17,
  DER_GENERALIZED_TIME = 0x18,
  DER_SEQUENCE = 0x30,
  DER_SET = 0x31,
};

/* Reads the TLV at the start of *in into *out and moves *in past it; -1 (and *in unchanged) when
 * *in does not start with one whole DER TLV. */
int der_next(der_span *in, der_item *out);
/* der_next, and the TLV must carry `tag`. */
int der_expect(der_span *in, unsigned char tag, der_item *out);

#endif
