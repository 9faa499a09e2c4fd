"""What rnnir derives from a program, kept outside it: the slice tracer, the slice maps of each state pair, the
element-exact maps of packed states, the state kinds of caches and the dataflow's suggested pairs, all computed on
demand and cached per program version by one :class:`rnnir.analysis.facts.AnalysisManager`."""
