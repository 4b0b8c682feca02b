"""The program model. Its parts (origins, the instruction graph, the worker's services) sit below
:mod:`xlasdk.formats`, whose readers make a computation's parts of a file's bytes; the computation
class sits above those readers (its file methods call them) and below ``formats.load``.

Modules of this package (the public names are re-exported by :mod:`xlasdk`):

=====================  ========================================================================
``computation``        :class:`~xlasdk.XlaComputation`: a built or loaded program, its module and graph
``origin``             where a program came from (built, loaded, edited, rewritten): its forms, made once
``graph_import``       a module's instruction graph: ``comp.instructions()``, :class:`HloNames`
``attr_kinds``         a loaded op's declared attributes read into the builder's typed values
``graph_edit``         new computations from that graph: ``with_outputs``, ``extract``, ``from_computation``
``walk``               the graph walker: what some nodes need (in creation order), who reads a node
``program_shape``      the program shape of a module, from MLIR types
``diagnostics``        one-line descriptions of MLIR/XLA errors
``_worker``            what a loaded program asks of the worker process (its module's text, XLA's
                       proto reader, the conversion to HLO)
``load_cache``         the records of the worker's verified loads, by content (``_record``: their form)
=====================  ========================================================================
"""
