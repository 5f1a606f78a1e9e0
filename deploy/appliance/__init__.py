"""The appliance on one machine: the topology file, the launcher that supervises its processes,
``status``, and the ``demo`` that runs the whole job end to end."""
