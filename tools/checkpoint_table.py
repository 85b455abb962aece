"""Print the README's table of timm checkpoint families (python tools/checkpoint_table.py).

The table comes from ``vitedu.timm_configs.FAMILIES``, the list tests/test_timm_hub.py checks against timm;
tests/test_pretrained_files.py checks that the README holds exactly this table.
"""

from vitedu.timm_configs import support_table

if __name__ == "__main__":
    print(support_table())
