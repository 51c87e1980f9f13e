//! Network elements: links with a rate, a propagation delay, a queue (drop-tail or weighted
//! fair queuing among flows) and a loss model; scheduled link changes.
