"""The C source an intrinsic group hands to `T.import_source`: our template header, whose functions carry the
names upstream's groups define (src/tl_templates/musa/quantize.h holds them, in portable MUSA C)."""

INTRIN_SOURCE = '#include "tl_templates/musa/quantize.h"\n'
