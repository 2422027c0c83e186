"""The film's front end: locations from explorers (Kalles Fraktaler, Fraktaler-3), targets found
(`farm find`), previews of a timeline. It writes job specs and renders through farm.run; the
kernels and the store know nothing of it."""
