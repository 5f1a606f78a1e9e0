"""The operator's page: one web page that shows the whole appliance (``tributary console``, and
``tributary up`` serves it too). Server-rendered HTML with inline SVG: no build step, no script
from the internet, and it works where the appliance does, with no internet at all."""
