/* The one length of the ids that travel between components: run, batch,
 * request and sandbox ids are 1..SG_ID_MAX bytes, in buffers of SG_ID_BUF.
 * Every place that stores one uses these, so no layer silently cuts an id
 * that another layer accepted. */
#ifndef SG_LIB_IDS_H
#define SG_LIB_IDS_H

#define SG_ID_MAX 127
#define SG_ID_BUF (SG_ID_MAX + 1)
/* An environment's session id starts so (src/session/): its sandbox's
 * batch id, which the agent counts sessions by. */
#define SG_SESSION_ID_PREFIX "ses-"

#endif
