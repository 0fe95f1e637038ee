/* The element count of an array (never of a pointer: sizeof would lie). */
#ifndef SG_LIB_ARRAY_LEN_H
#define SG_LIB_ARRAY_LEN_H

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
