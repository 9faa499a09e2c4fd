"""What rnnir's ``pytest11`` entry point loads: a stand-in that names the plugin, so the plugin is registered once.

pytest registers an entry point's module under the entry point's name (``rnnir``), and a conftest's
``pytest_plugins = ["rnnir.pytest_plugin"]`` (or ``-p rnnir.pytest_plugin``) under the module's own name;
pluggy refuses one module object under two names ("Plugin already registered under a different name").
So the entry point does not load the plugin itself: it loads this module, which holds no fixture or hook
and only names the plugin, and pytest registers :mod:`rnnir.pytest_plugin` under that one name however it
is asked for (``-p no:rnnir`` still turns the entry point off).
"""

pytest_plugins = ["rnnir.pytest_plugin"]
