"""The built-in input explorer, by concern (the entry script is r2e_explore.py):

- specs: input values ("specs") and how they are written in a harness and built;
- tracing: the arc tracer (and its watch of the compiled patterns calls use), the executor (per-call timer, output suppressed) and the budget;
- regexgen: strings a regular expression finds (for the static pools and the pattern watch);
- static: static information about a function (syntax tree, literals, usage, doctests, call
  sites, annotations);
- pools: the candidate values of a parameter;
- inputs: input spaces, inputs and their mutations;
- search: loading the target, constructions, observing calls, the coverage-guided loop and the
  mutation analysis;
- mutants: mutants of the function and which inputs kill them;
- select: choosing the kept tests (branches covered, mutants killed);
- render: writing the harness.

Runs with the repository's Python (3.11+, standard library plus coverage only). Imported by
r2e_explore.py from its own folder: the package's submodules are not top-level modules, so they
never shadow a repository's own modules.
"""
