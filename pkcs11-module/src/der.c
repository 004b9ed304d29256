#include "der.h"

/* Lengths of more than four octets: no certificate this module takes is that long. */
#define DER_MAX_LENGTH_OCTETS 4

/* The length field at p (n bytes available): the contents' length and the header's size. */
static int der_length(const unsigned char *p, size_t n, size_t *len, size_t *header) {
  if (n < 2) return -1;
  if (p[1] < 0x80) {
    *len = p[1];
    *header = 2;
    return 0;
  }
  size_t octets = p[1] & 0x7f;
  /* 0x80 is BER's indefinite length; a leading zero octet or a long form for a length below 128
   * is not the shortest form DER requires. */
  if (octets == 0 || octets > DER_MAX_LENGTH_OCTETS || n - 2 < octets || p[2] == 0) return -1;
  size_t v = 0;
  for (size_t i = 0; i < octets; i++) v = v << 8 | p[2 + i];
  if (v < 0x80) return -1;
  *len = v;
  *header = 2 + octets;
  return 0;
}

int der_next(der_span *in, der_item *out) {
  size_t len, header;
  if (in->len < 2 || (in->p[0] & 0x1f) == 0x1f) return -1; /* high tag numbers: none expected */
  if (der_length(in->p, in->len, &len, &header) != 0 || len > in->len - header) return -1;
  out->tag = in->p[0];
  out->whole = (der_span){in->p, header + len};
  out->value = (der_span){in->p + header, len};
  in->p += header + len;
  in->len -= header + len;
  return 0;
}

int der_expect(der_span *in, unsigned char tag, der_item *out) {
  der_span rest = *in;
  if (der_next(&rest, out) != 0 || out->tag != tag) return -1;
  *in = rest;
  return 0;
}
